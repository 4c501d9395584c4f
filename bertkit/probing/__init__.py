"""The linear probe, in one place: ``bertkit probe`` fits a logistic-regression head on a frozen
encoder's pooled vectors and saves a directory that eval, predict and report take.

* command.py: the command's spine (checks -> read -> load -> fit -> save);
* classifier.py: the scikit-learn fit, folded into one linear head;
* network.py: a saved probe as a network (encoder + pooling + head) for eval and predict;
* card.py: the model card's text and code for a probe directory (torch-free).

The directory's file names and the ``probe`` section's shape are bertkit.json's (bertkit/model_dir).
"""
