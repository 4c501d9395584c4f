"""bertkit: fine-tune, evaluate and serve BERT-family models on classic NLP tasks."""

__version__ = "0.1.0"
