"""Tiny random encoders of every supported family, each with the tokenizer KIND its real checkpoints
ship, built from hand-made vocabularies (no downloads, deterministic, a few hundred KB each).

* WordPiece (uncased): BERT, DistilBERT, ELECTRA
* byte-level BPE (cased, GPT-2 byte alphabet + hand-made merges): RoBERTa, ModernBERT
* SentencePiece-style Unigram with Metaspace ("▁" word starts): ALBERT (uncased), DeBERTa-v2 (cased)

``build_family(name, directory)`` saves a base model (``XxxModel``, no task head, like a pretrained
checkpoint) and a fast tokenizer (``tokenizer.json``) that ``AutoTokenizer`` loads back.
"""

from __future__ import annotations

from pathlib import Path

# Every word the test data uses; the vocabularies know each of them (WordPiece and Unigram as whole
# pieces, byte-level BPE as a whole piece after a space), so inputs are not all unknown tokens.
WORDS = (
    "the a is was and not very good great fine bad awful poor movie film plot story acting it this "
    "who where lives works in at for met visited city company same different said , . ? ! "
    "john mary obama anna paris london berlin rome google acme"
).split()
CAPITALISED = [
    "John",
    "Mary",
    "Obama",
    "Anna",
    "Paris",
    "London",
    "Berlin",
    "Rome",
    "Google",
    "Acme",
    "The",
    "Who",
    "Where",
    "It",
    "This",
]
SUFFIXES = ["s", "ing", "ed"]
FAMILIES = ("bert", "distilbert", "electra", "roberta", "albert", "deberta-v2", "modernbert")
HIDDEN, LAYERS, HEADS, FFN = 32, 2, 2, 64
POSITIONS = 128  # deliberately below BERT's 512: the --max-length checks have a low limit to hit


def build_family(name: str, directory: Path) -> Path:
    """Save a tiny random ``name`` model plus its tokenizer into ``directory``; returns it."""
    tokenizer = TOKENIZERS[FAMILY_TOKENIZER[name]]()
    model = _model(name, tokenizer)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# --- tokenizers -------------------------------------------------------------------------------------
def wordpiece_tokenizer(fast_class: str = "BertTokenizer"):
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(dict.fromkeys(WORDS))
    vocab += [f"##{s}" for s in SUFFIXES] + [c for c in "abcdefghijklmnopqrstuvwxyz0123456789-'()" if c not in vocab]
    vocab += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    return getattr(transformers, fast_class)(vocab={token: i for i, token in enumerate(vocab)})


def _byte_alphabet() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (a space is 'Ġ')."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return list(bytes_to_unicode().values())


def _bpe_vocab_and_merges(specials: list[str]) -> tuple[dict, list]:
    """Merges that build each known word left to right, after a space ('Ġparis') and without one.

    All space-led merges rank first, so a word after a space always becomes one piece; a word
    without its space (the first word of a text) may stay split, as in real GPT-2 style BPE.
    """
    vocab = {token: i for i, token in enumerate(specials + _byte_alphabet())}
    merges = []
    words = list(dict.fromkeys(WORDS + CAPITALISED + [w + s for w in ("movie", "film", "city", "work") for s in "s"]))
    for spaced in (True, False):
        for word in words:
            if len(word) < 2 and not spaced:
                continue
            pieces = (["Ġ"] if spaced else []) + list(word)
            current = pieces[0]
            for piece in pieces[1:]:
                merged = current + piece
                if merged not in vocab:
                    vocab[merged] = len(vocab)
                    merges.append((current, piece))
                current = merged
    return vocab, merges


def roberta_tokenizer():
    from transformers import RobertaTokenizer

    vocab, merges = _bpe_vocab_and_merges(["<s>", "<pad>", "</s>", "<unk>"])
    vocab["<mask>"] = len(vocab)
    return RobertaTokenizer(vocab=vocab, merges=merges)  # add_prefix_space=False, as roberta-base ships


def modernbert_tokenizer():
    """ModernBERT's layout: byte-level BPE with BERT-style [CLS] ... [SEP] special tokens, a
    generic fast tokenizer (no model-specific class) whose template post-processor does not trim
    the leading space from offsets."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab, merges = _bpe_vocab_and_merges(specials)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
    )


def _unigram_vocab(specials: list[str], cased: bool) -> list[tuple[str, float]]:
    """Whole words after '▁' are likely pieces; single characters make anything else encodable."""
    words = list(dict.fromkeys(WORDS + (CAPITALISED if cased else [])))
    letters = "abcdefghijklmnopqrstuvwxyz" + ("ABCDEFGHIJKLMNOPQRSTUVWXYZ" if cased else "") + "0123456789,.?!'-()"
    vocab = [(token, 0.0) for token in specials] + [("▁", -3.0)]
    vocab += [(f"▁{word}", -2.0) for word in words] + [(suffix, -2.5) for suffix in SUFFIXES]
    vocab += [(c, -5.0) for c in letters]
    return vocab


def albert_tokenizer():
    from transformers import AlbertTokenizer

    return AlbertTokenizer(vocab=_unigram_vocab(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], cased=False))


def deberta_v2_tokenizer():
    from transformers import DebertaV2Tokenizer

    return DebertaV2Tokenizer(vocab=_unigram_vocab(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], cased=True))


TOKENIZERS = {
    "wordpiece": wordpiece_tokenizer,
    "distilbert-wordpiece": lambda: wordpiece_tokenizer("DistilBertTokenizer"),
    "roberta-bpe": roberta_tokenizer,
    "modernbert-bpe": modernbert_tokenizer,
    "albert-unigram": albert_tokenizer,
    "deberta-unigram": deberta_v2_tokenizer,
}
FAMILY_TOKENIZER = {
    "bert": "wordpiece",
    "distilbert": "distilbert-wordpiece",
    "electra": "wordpiece",
    "roberta": "roberta-bpe",
    "xlm-roberta": "roberta-bpe",  # not in FAMILIES: built for the packing tests (RoBERTa's positions, its own type)
    "modernbert": "modernbert-bpe",
    "albert": "albert-unigram",
    "deberta-v2": "deberta-unigram",
}


# --- models -----------------------------------------------------------------------------------------
def _model(name: str, tokenizer):
    import torch
    import transformers as t

    size = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    bert_like = dict(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=POSITIONS,
        **size,
    )
    if name == "bert":
        config = t.BertConfig(**bert_like)
    elif name == "electra":
        config = t.ElectraConfig(embedding_size=HIDDEN, **bert_like)
    elif name == "distilbert":
        config = t.DistilBertConfig(
            dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN, max_position_embeddings=POSITIONS, **size
        )
    elif name in ("roberta", "xlm-roberta"):  # positions start after the padding index (514 = 512 + 2)
        config = (t.RobertaConfig if name == "roberta" else t.XLMRobertaConfig)(
            **{**bert_like, "max_position_embeddings": POSITIONS + tokenizer.pad_token_id + 1},
            type_vocab_size=1,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
        )
    elif name == "albert":
        config = t.AlbertConfig(embedding_size=16, **bert_like)
    elif name == "deberta-v2":  # v3 style: relative positions only, no absolute position input, no segments
        config = t.DebertaV2Config(
            **bert_like,
            type_vocab_size=0,
            relative_attention=True,
            position_buckets=32,
            max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
        )
    elif name == "modernbert":
        config = t.ModernBertConfig(
            hidden_size=HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            intermediate_size=FFN,
            max_position_embeddings=POSITIONS,
            local_attention=16,
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            **size,
        )
    else:
        raise ValueError(f"unknown family {name}")
    torch.manual_seed(0)
    return t.AutoModel.from_config(config)
