"""Learned fine verification: a fine-tuned MiniLM (ONNX) decides, an optional LLM instructs."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.backends.learned_runtimes import SETUP_HINT, open_runner
from epic_edge.backends.runtime_support import with_options
from epic_edge.decision import decide, guard, keep_levels
from epic_edge.errors import EpicEdgeError, ModelNotFoundError
from epic_edge.keep_score import KeepScore
from epic_edge.optional import optional_import
from epic_edge.types import Preference, Verdict

log = logging.getLogger(__name__)

DEFAULT_MODEL = "epic-verifier-minilm/model.onnx"
PREFERENCE_CACHE = 4096  # preference vectors kept between items


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))


class LearnedVerifier:
    """Scores (preference, item) pairs with a model trained by epic_edge_lab.verifier.train.

    model.json "kind": "siamese" (fine-tuned bi-encoder: P = sigmoid(scale * cos + bias)) or
    "cross-encoder" (one logit per "[CLS] preference [SEP] item"). One batched ONNX pass;
    keeps the candidates with P(Keep) >= threshold. Instructions come from `instructor` (an
    object with write_instructions(item, candidates, kept), e.g. the llama.cpp verifier, built
    on first need) or from a template, so the LLM runs only for kept items."""

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path | None = None, *,
                 threshold: float | None = None, floor: float | None = None,
                 max_length: int | None = None,
                 threads: int = 0, max_preferences_per_item: int = 2,
                 instructor: Any = None, providers: Sequence[Any] | None = None,
                 compute_units: str = "CPU_AND_NE", keep_score: KeepScore | None = None) -> None:
        Tokenizer = optional_import("tokenizers", "cpu", "the learned verifier").Tokenizer
        self.model_path = Path(model_path)
        tok_path = Path(tokenizer_path) if tokenizer_path else (
            self.model_path.parent / "tokenizer.json")
        for what, path in (("verifier model", self.model_path), ("tokenizer", tok_path)):
            if not path.exists():  # a Core ML .mlpackage is a folder
                raise ModelNotFoundError(f"{what} not found: {path}; {SETUP_HINT}")
        meta_path = self.model_path.parent / "model.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        self.threshold, self.floor = keep_levels(
            threshold if threshold is not None else meta.get("threshold", 0.5), floor)
        self.max_length = int(max_length or meta.get("max_length", 192))
        self.max_preferences_per_item = max(1, int(max_preferences_per_item))
        self._runner: Any = open_runner(self.model_path, threads=threads, providers=providers,
                                        compute_units=compute_units)
        # Dynamic int8 rounds a whole batch with one scale, so a text's score would depend on
        # its batch neighbours (up to 0.12 in P(Keep)): such a model runs one text at a time.
        self._per_text = meta.get("precision") == "int8" or bool(meta.get("per_text"))
        self.kind = str(meta.get("kind", "cross-encoder"))
        self._scale = float(meta.get("scale", 1.0))
        self._bias = float(meta.get("bias", 0.0))
        self._tok = Tokenizer.from_file(str(tok_path))
        self._tok.enable_truncation(max_length=self.max_length, strategy="only_second"
                                    if self.kind == "cross-encoder" else "longest_first")
        self._tok.no_padding()
        self._instructor = instructor
        # rescues what the decision drops, where ingest gives the pair's context (verify)
        self.keep_score = keep_score
        self._pref_vectors: dict[str, np.ndarray] = {}
        self._passages: dict[str, np.ndarray] = {}  # precomputed by remember_passages
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> LearnedVerifier:
        """[verifier] backend = "learned"; `model` is model.onnx (ONNX Runtime with `providers`),
        model.<delegate>.pte (ExecuTorch) or model.mlpackage (Core ML); instructions = "llm"
        (the `llm_backend` verifier, default "llama-cpp", loaded on the first kept item) |
        "template" (no LLM at all); keep_score: a keep score file (epic_edge.keep_score; a
        bare name is one the package ships) that rescues what the decision drops."""
        model = Path(str(config.get("model", DEFAULT_MODEL))).expanduser()
        path = model if model.is_absolute() else Path(model_dir) / model
        qnn = config.get("qnn_model")  # ExecuTorch on the NPU, exported where the SDK is
        if config.get("prefer_qnn") and qnn and (Path(model_dir) / str(qnn)).is_file():
            path = Path(model_dir) / str(qnn)
        instructor = None
        if config.get("instructions", "template") != "template":
            instructor = _LazyInstructor(config, Path(model_dir))
        return cls(path, threshold=config.get("threshold"), floor=config.get("floor"),
                   max_length=config.get("max_length"), threads=int(config.get("threads", 0)),
                   max_preferences_per_item=int(config.get("max_preferences_per_item", 2)),
                   instructor=instructor, providers=with_options(config, path.parent),
                   compute_units=str(config.get("compute_units", "CPU_AND_NE")),
                   keep_score=KeepScore.named(config.get("keep_score"), Path(model_dir)))

    def scores(self, item: str, candidates: Sequence[Preference]) -> np.ndarray:
        """P(Keep) for each candidate preference, one batched forward pass."""
        if not candidates:
            return np.zeros(0)
        return self.score_pairs([p.text for p in candidates], [item] * len(candidates))

    def score_pairs(self, prefs: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """P(Keep) for each (preference, passage) pair."""
        if self.kind == "siamese":
            vecs = self._siamese_vectors(prefs, passages)
            cos = np.array([float(vecs[p] @ vecs[x]) for p, x in zip(prefs, passages)])
            return _sigmoid(self._scale * cos + self._bias)
        logits = self._run(self._encode_pairs(prefs, passages))
        return _sigmoid(np.asarray(logits, dtype=np.float64).reshape(-1))

    def _encode_pairs(self, prefs: Sequence[str], passages: Sequence[str]) -> list[Any]:
        """Pairs truncated in the passage (as trained); a preference too long for that alone
        truncates both sides instead of failing the item."""
        pairs = list(zip(prefs, passages))
        try:
            return self._tok.encode_batch(pairs)
        except Exception:  # tokenizers: "Second sequence not long enough to be truncated"
            from tokenizers import Tokenizer

            both = Tokenizer.from_str(self._tok.to_str())
            both.enable_truncation(max_length=self.max_length, strategy="longest_first")
            return both.encode_batch(pairs)

    def _siamese_vectors(self, prefs: Sequence[str], passages: Sequence[str]
                         ) -> dict[str, np.ndarray]:
        """Vectors of the pair texts; a persona's few preferences are encoded once and kept."""
        missing = [t for t in dict.fromkeys(prefs) if t not in self._pref_vectors]
        if missing:
            if len(self._pref_vectors) + len(missing) > PREFERENCE_CACHE:
                self._pref_vectors.clear()
                missing = list(dict.fromkeys(prefs))
            # one at a time: int8 scales each batch by its own range, so a preference's vector
            # (and every verdict) would depend on which preferences arrived with it
            self._pref_vectors.update((t, self._run(self._tok.encode_batch([t]))[0])
                                      for t in missing)
        vecs = {p: self._pref_vectors[p] for p in prefs}
        vecs.update((t, self._passages[t]) for t in passages if t in self._passages)
        texts = [t for t in dict.fromkeys(passages) if t not in vecs]
        if texts:
            vecs.update(zip(texts, self._run(self._tok.encode_batch(texts))))
        return vecs

    # -- the siamese encoder as an Embedder, so a bench can cache a corpus's vectors ------
    @property
    def fingerprint(self) -> str:
        stat = self.model_path.stat()
        return f"learned-verifier:{self.model_path.name}:{stat.st_size}:{stat.st_mtime_ns}"

    @property
    def dim(self) -> int:
        return int(self._run(self._tok.encode_batch(["dim"])).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The siamese encoder's vectors of `texts` (what score_pairs compares)."""
        return self._run(self._tok.encode_batch(list(texts))).astype(np.float32)

    def remember_passages(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Use these precomputed encoder vectors instead of re-encoding the texts."""
        self._passages.update(zip(texts, np.asarray(vectors, np.float64)))

    def _run(self, encs: list[Any]) -> np.ndarray:
        out = []
        step = 1 if self._per_text else 32
        for s in range(0, len(encs), step):
            chunk = encs[s:s + step]
            width = max(len(e.ids) for e in chunk)
            arrays = {n: np.zeros((len(chunk), width), dtype=np.int64)
                      for n in ("input_ids", "attention_mask", "token_type_ids")}
            for row, e in enumerate(chunk):
                arrays["input_ids"][row, :len(e.ids)] = e.ids
                arrays["attention_mask"][row, :len(e.ids)] = e.attention_mask
                arrays["token_type_ids"][row, :len(e.ids)] = e.type_ids
            out.append(self._runner.run(arrays))
        return np.concatenate(out)

    @property
    def rescue_below(self) -> float:
        """The P(Keep) under which the keep score may rescue an item (the floor, else the
        threshold): a verdict at or above it is the decision's own, whatever the rescore."""
        return self.floor if self.floor is not None else self.threshold

    def verify(self, item: str, candidates: Sequence[Preference],
               rescore: Callable[[np.ndarray], np.ndarray] | None = None) -> Verdict:
        """Keep/Discard by P(Keep) and the threshold (and floor); given `rescore` (the keep
        score of this item's candidates, KeepScore.for_item) and a keep score, an item under
        the floor is also kept at P(bears) >= the keep score's threshold."""
        candidates = list(candidates)
        guarded = guard(item, candidates)
        if guarded is not None:
            return guarded
        with self._lock:  # a scoring fault propagates: epic_edge.faults decides
            probs = self.scores(item, candidates)
        floor, rescuing = self.floor, rescore is not None and self.keep_score is not None
        sure, raw = self.rescue_below, probs
        if rescuing:
            # the decision's own keeps first; under its floor the keep score rescues what bears
            # on a preference, ranked below every one of them by P(bears)
            bears = np.asarray(rescore(raw), np.float64)
            probs = np.where(raw >= sure, raw, sure * bears)
            floor = sure * self.keep_score.threshold
        verdict = decide(item, candidates, probs, threshold=self.threshold, floor=floor,
                         max_preferences=self.max_preferences_per_item, write=self._instructions)
        if rescuing and verdict.reason.startswith("P(Keep)="):
            verdict.reason = self._rescue_reason(verdict, float(np.max(raw)),
                                                 float(np.max(bears)))
        return verdict

    def _rescue_reason(self, verdict: Verdict, p_keep: float, bears: float) -> str:
        """The reason of a verdict the keep score took part in, in the levels the user set
        (decide saw the rescue level floor x threshold, not the floor itself)."""
        sure, level = self.rescue_below, self.keep_score.threshold
        name = "floor" if self.floor is not None else "threshold"
        if not verdict.keep:
            why = (f"P(Keep)={p_keep:.3f} < {name} {sure:.3f} and P(bears)={bears:.3f} < keep "
                   f"score threshold {level:.3f}")
        elif verdict.confidence < sure:
            why = (f"P(bears)={verdict.confidence / sure:.3f} >= keep score threshold "
                   f"{level:.3f}: kept while the memory has room, evicted before the "
                   "decision's own keeps")
        elif verdict.confidence < self.threshold:
            why = f"P(Keep)={p_keep:.3f} >= floor {sure:.3f}: kept while the memory has room"
        else:
            return verdict.reason
        return "; ".join([why, *verdict.reason.split("; ")[1:]])

    def _instructions(self, item: str, candidates: list[Preference], kept: list[Preference]
                      ) -> tuple[dict[int, str], list[str], int]:
        """The instruction LLM's texts for a kept item ({} for the template)."""
        if self._instructor is None:
            return {}, [], 0
        try:
            return self._instructor.write_instructions(item, candidates, kept)
        except EpicEdgeError as exc:  # e.g. the LLM is not installed: say so once
            log.warning("instruction LLM unavailable (%s); using templates", exc)
            self._instructor = None
            return {}, [], 0
        except Exception as exc:  # never crash ingest, never log the item
            log.warning("instruction LLM failed (%s); using templates", type(exc).__name__)
            return {}, [f"template instructions ({type(exc).__name__})"], 0

    def close(self) -> None:
        self._runner = None
        if self._instructor is not None and hasattr(self._instructor, "close"):
            self._instructor.close()


class _LazyInstructor:
    """Builds the profile's LLM verifier (through the registry) on the first kept item."""

    def __init__(self, config: dict[str, Any], model_dir: Path) -> None:
        self._config = {"backend": str(config.get("llm_backend", "llama-cpp")),
                        "model": config.get("llm_model", "smollm2-135m-instruct-q4_1.gguf")}
        for key in ("n_ctx", "threads", "max_instruction_tokens"):
            if key in config:
                self._config[key] = config[key]
        self._model_dir = model_dir
        self._llm: Any = None

    def write_instructions(self, item: str, candidates: list[Preference],
                           kept: list[Preference]) -> tuple[dict[int, str], list[str], int]:
        if self._llm is None:
            from epic_edge import registry

            self._llm = registry.create("verifier", self._config, self._model_dir)
        return self._llm.write_instructions(item, candidates, kept)

    def close(self) -> None:
        if self._llm is not None and hasattr(self._llm, "close"):
            self._llm.close()
        self._llm = None
