"""How far a classifier's probabilities can be trusted, and how to make them trustworthy (torch-free).

* Temperature scaling (Guo et al., 2017): one scalar T, probabilities softmax(logits / T); the
  argmax never changes. T is fitted by L-BFGS-B (scipy) on the negative log-likelihood of held-out
  gold labels, over log T with its exact gradient, in float64. Why not torch's LBFGS: this layer is
  torch-free (the fit runs on numbers a command already has) and one parameter in float64 needs no
  autograd; why not scikit-learn's ``CalibratedClassifierCV(method="temperature")``: it wants an
  estimator, not logits (its fit, a bounded Brent search on log(1/T), is what the tests compare with).
* Expected calibration error: 15 equal-width bins of the top-label probability, sum over bins of
  (bin share) x |accuracy - mean confidence| (Guo et al.'s definition; a bin is (lo, hi], the first
  [0, 1/15]). Brier score: the mean over rows of sum_k (p_k - y_k)^2 (multi-class form; for two
  classes it is twice scikit-learn's ``brier_score_loss`` of the positive class).
* Split conformal prediction sets (Vovk et al. 2005; Angelopoulos & Bates 2021): nonconformity
  score s = 1 - p(gold label) on n calibration rows; q = the ceil((n+1)(1-alpha))-th smallest score
  (no such score when that rank exceeds n: every label); a row's set holds every label whose
  1 - p <= q. Marginal coverage >= 1 - alpha for exchangeable rows. Plain numpy rather than crepes:
  predict needs no optional extra, and any coverage is computed from the stored sorted scores
  (crepes' unsmoothed p-values give the same sets; the tests check it).
"""

from __future__ import annotations

import math

import numpy as np

BINS = 15
MIN_T, MAX_T = 1e-2, 1e2  # a temperature outside this range says the logits carry no information


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.asarray(logits, dtype=np.float64)
    shifted = shifted - shifted.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def scaled(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(logits / temperature), row by row."""
    return np.exp(log_softmax(np.asarray(logits, dtype=np.float64) / temperature))


def nll(logits: np.ndarray, gold: np.ndarray, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of ``gold`` (class ids) under softmax(logits / temperature)."""
    log_p = log_softmax(np.asarray(logits, dtype=np.float64) / temperature)
    return float(-log_p[np.arange(len(gold)), np.asarray(gold)].mean())


def fit_temperature(logits: np.ndarray, gold) -> float:
    """The T minimising the NLL of ``gold`` under softmax(logits / T). ``logits`` may be any
    per-row shift of the logits (log-probabilities at T = 1 give the same T)."""
    from scipy.optimize import minimize

    z, y = np.asarray(logits, dtype=np.float64), np.asarray(gold, dtype=np.int64)
    rows = np.arange(len(y))

    def loss_and_gradient(theta):
        beta = math.exp(-theta[0])  # 1 / T, with theta = log T
        log_p = log_softmax(z * beta)
        p = np.exp(log_p)
        loss = -log_p[rows, y].mean()
        # d loss / d beta = mean(E_p[z] - z_gold); d beta / d theta = -beta
        d_beta = ((p * z).sum(axis=1) - z[rows, y]).mean()
        return loss, np.array([-beta * d_beta])

    bounds = [(math.log(MIN_T), math.log(MAX_T))]
    found = minimize(loss_and_gradient, np.zeros(1), jac=True, method="L-BFGS-B", bounds=bounds)
    return float(math.exp(found.x[0]))


def expected_calibration_error(probabilities: np.ndarray, gold, bins: int = BINS) -> float:
    """Top-label ECE with ``bins`` equal-width bins of the top probability."""
    table = reliability(probabilities, gold, bins)
    total = sum(row["count"] for row in table)
    return float(sum(row["count"] / total * abs(row["accuracy"] - row["confidence"]) for row in table))


def reliability(probabilities: np.ndarray, gold, bins: int = BINS) -> list[dict]:
    """The non-empty bins of the top probability: lower and upper edge, rows, their accuracy and
    mean confidence (what the ECE sums and the reliability diagram draws)."""
    p = np.asarray(probabilities, dtype=np.float64)
    confidence, correct = p.max(axis=1), (p.argmax(axis=1) == np.asarray(gold)).astype(np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)  # (lo, hi]; 0 in the first
    table = []
    for b in range(bins):
        chosen = index == b
        if chosen.any():
            table.append(
                {
                    "lower": float(edges[b]),
                    "upper": float(edges[b + 1]),
                    "count": int(chosen.sum()),
                    "accuracy": float(correct[chosen].mean()),
                    "confidence": float(confidence[chosen].mean()),
                }
            )
    return table


def brier_score(probabilities: np.ndarray, gold) -> float:
    """Mean over rows of sum_k (p_k - [k == gold])^2."""
    p = np.asarray(probabilities, dtype=np.float64)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(p)), np.asarray(gold)] = 1.0
    return float(((p - onehot) ** 2).sum(axis=1).mean())


def calibration_scores(probabilities: np.ndarray, gold) -> dict:
    """ECE, Brier score, NLL and accuracy of one set of probabilities (rounded for the record)."""
    p = np.asarray(probabilities, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    log_p = np.log(np.clip(p[np.arange(len(gold)), gold], 1e-300, None))
    return {
        "ece": round(expected_calibration_error(p, gold), 6),
        "brier": round(brier_score(p, gold), 6),
        "nll": round(float(-log_p.mean()), 6),
        "accuracy": round(float((p.argmax(axis=1) == gold).mean()), 6),
    }


# --- split conformal prediction sets --------------------------------------------------------------


def nonconformity(probabilities: np.ndarray, gold) -> np.ndarray:
    """1 - p(gold label) per calibration row, sorted (what bertkit.json stores)."""
    p = np.asarray(probabilities, dtype=np.float64)
    return np.sort(1.0 - p[np.arange(len(p)), np.asarray(gold)])


def set_nonconformity(probabilities: np.ndarray, gold_sets: list) -> np.ndarray:
    """Multi-label: the largest 1 - p over a row's gold labels (0 for a row with none), sorted. A row's
    set (every label with 1 - p <= q) then holds *all* its gold labels exactly when its score is <= q,
    so the split-conformal guarantee is on the whole gold set (Angelopoulos and Bates, 2021, sec. 4)."""
    p = np.asarray(probabilities, dtype=np.float64)
    scores = [max((1.0 - p[row, label] for label in labels), default=0.0) for row, labels in enumerate(gold_sets)]
    return np.sort(np.asarray(scores, dtype=np.float64))


def conformal_quantile(scores, coverage: float) -> float:
    """The ceil((n+1) coverage)-th smallest score; infinity (every label) when that rank exceeds n."""
    ordered = np.sort(np.asarray(scores, dtype=np.float64))
    rank = math.ceil((len(ordered) + 1) * coverage - 1e-12)  # the 1e-12: 0.9 * 10 is 9, not 9.000000000000002
    return float("inf") if rank > len(ordered) else float(ordered[rank - 1])


def prediction_sets(probabilities: np.ndarray, quantile: float) -> np.ndarray:
    """0/1 per row and label: the label is in the row's set when 1 - p <= ``quantile``."""
    return (1.0 - np.asarray(probabilities, dtype=np.float64) <= quantile + 1e-12).astype(np.int64)


def set_summary(sets: np.ndarray, gold=None) -> dict:
    """Mean set size, the shares of empty and of full sets, and (with ``gold``) the coverage."""
    sets = np.asarray(sets)
    sizes = sets.sum(axis=1)
    summary = {
        "rows": int(len(sets)),
        "mean_set_size": round(float(sizes.mean()), 6) if len(sets) else 0.0,
        "empty_rate": round(float((sizes == 0).mean()), 6) if len(sets) else 0.0,
        "full_rate": round(float((sizes == sets.shape[1]).mean()), 6) if len(sets) else 0.0,
    }
    if gold is not None:
        summary["coverage"] = round(float(sets[np.arange(len(sets)), np.asarray(gold)].mean()), 6)
    return summary


def fit_warnings(probabilities: np.ndarray, gold: np.ndarray, temperature: float) -> list[str]:
    """What makes a fitted temperature meaningless: rows the model gets all right (its own training
    rows, most often: the NLL falls toward 0 as T does, so every probability is pushed to 0 or 1),
    or a temperature at the search's bound."""
    said = []
    if len(gold) and bool((probabilities.argmax(axis=1) == gold).all()):
        said.append(
            f"the model predicts every calibration row right: a temperature fitted there ({temperature:.3g}) only "
            "sharpens its probabilities toward 0 and 1; calibrate on held-out rows it did not train on"
        )
    elif not MIN_T * 1.01 < temperature < MAX_T / 1.01:
        said.append(f"the temperature hit its bound ({temperature:.3g}): the logits carry little information here")
    return said


def calibration_record(probabilities: np.ndarray, gold) -> dict:
    """What a fit on held-out rows records: the temperature, the scores before and after, the
    reliability tables, and the sorted conformal scores of the calibrated probabilities (a split
    conformal set needs its scores' function fixed before them; one scalar fitted on the same rows
    bends that little, and for two labels not at all: the scores' order is the margin's at any T)."""
    uncalibrated = np.asarray(probabilities, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    log_p = np.log(np.clip(uncalibrated, 1e-300, None))
    temperature = round(fit_temperature(log_p, gold), 6)  # as stored: the scores below are the stored T's
    calibrated = scaled(log_p, temperature)
    return {
        "method": "temperature scaling (L-BFGS-B on the negative log-likelihood)",
        "temperature": temperature,
        "warnings": fit_warnings(uncalibrated, gold, temperature),
        "examples": int(len(gold)),
        "bins": BINS,
        "before": calibration_scores(uncalibrated, gold),
        "after": calibration_scores(calibrated, gold),
        "reliability": {"before": reliability(uncalibrated, gold), "after": reliability(calibrated, gold)},
        "conformal": {
            "score": "1 - calibrated probability of the gold label",
            "scores": [float(s) for s in nonconformity(calibrated, gold)],
        },
    }
