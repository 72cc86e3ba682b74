"""`weightdiff a/ b/`: pair rank dumps by (pp, tp, dp) and compare every parameter of every pair.

Pairs are compared in parallel (threads: torch's kernels and safetensors' reads release the GIL), each pair
streaming one tensor at a time. A checkpoint stands for every dp rank of its (pp, tp). A pair whose files
cannot be opened gives one error and the other pairs go on; a tensor that cannot be read gives one error and
the other tensors go on. Either way the tensors not looked at are counted (`n_unreadable`), so that a
report never calls unread tensors equal. Only the parameters that differ are kept per pair, with a
count of the equal ones, so a report over thousands of ranks stays small.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from hangdoctor.topology import RankCoords
from weightdiff.analysis.classify import norm_reason
from weightdiff.analysis.compare import Tolerance, ValueDiff, compare_tensor
from weightdiff.analysis.pairing import pair_keys, single_whole
from weightdiff.analysis.stored_copies import StoredCopies
from weightdiff.analysis.tied_names import held_as_one_with, kept_as
from weightdiff.analysis.tp_shards import ShardView, shard_spec
from weightdiff.errors import BadInput
from weightdiff.read.dtypes import itemsize
from weightdiff.read.name_map import RenamedValues
from weightdiff.read.sources import Selection
from weightdiff.read.values import open_values
from weightdiff.records import RankDump, TensorMeta

# Statuses of one parameter of one pair. "restored" and "stored once" are informational (not differences).
DIFFERS, SHAPE, DTYPE, MISSING_A, MISSING_B, NOT_SAVED, RESTORED, UNREADABLE, STORED_ONCE = (
    "differs", "shape", "dtype", "missing in a", "missing in b", "not saved", "restored by load", "unreadable",
    "stored once")
NOT_DIFFERENCES = {RESTORED, STORED_ONCE}


@dataclass
class ParamDiff:
    name: str
    status: str
    coords: RankCoords  # where (the dump side's coordinates when the other side is a checkpoint)
    numel: int = 0
    n_differ: int = 0
    max_abs: float = 0.0
    mean_abs: float = 0.0
    fraction: float = 0.0
    first_index: list[int] | None = None
    max_index: list[int] | None = None
    shape_a: list[int] | None = None
    shape_b: list[int] | None = None
    dtype_a: str | None = None
    dtype_b: str | None = None
    reset_to: str | None = None  # "ones" / "zeros": b now equals a default initialisation and a did not
    module_class: str = ""
    norm: str | None = None  # why it is a norm parameter, when it is
    note: str = ""
    by_fingerprint: bool = False  # decided from the sidecars' hashes, values not read
    role: str = "parameter"  # "buffer" for running statistics and other buffers

    @property
    def is_difference(self) -> bool:
        return self.status not in NOT_DIFFERENCES


@dataclass
class PairResult:
    coords_a: RankCoords
    coords_b: RankCoords
    source_a: str
    source_b: str
    diffs: list[ParamDiff] = field(default_factory=list)
    n_equal: int = 0
    n_compared: int = 0  # tensors in both dumps that were compared (values, hashes, or a shape mismatch)
    n_unreadable: int = 0  # tensors that could not be read, hence not compared (nor called equal)
    elements: int = 0
    bytes_read: int = 0
    errors: list[str] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)  # "name on where: NaN or inf ..." for each such tensor


def _where(da: RankDump, db: RankDump) -> RankCoords:
    """Where a difference is: the ranked side's coordinates (a whole model has none; a checkpoint slice stands
    for all dp ranks of its (pp, tp))."""
    if da.whole != db.whole:
        return db.coords if da.whole else da.coords
    return da.coords if db.replicated_dp and not da.replicated_dp else db.coords


def _absent_status(present: TensorMeta, reason: str) -> tuple[str, str]:
    if present.tie is not None and present.tie.synced and present.tie.ranks:
        return RESTORED, (f"tied copy not stored ({reason}); DeepSpeed broadcasts tied attribute "
                          f"{present.leaf} from the first stage after a load")
    if present.tie is not None and not present.tie.synced:
        return NOT_SAVED, (f"not stored ({reason}) and not a tied attribute of module {present.tie.key!r}: "
                           "after a load it keeps its initial values")
    return NOT_SAVED, f"not stored ({reason})"


def compare_pair(da: RankDump, db: RankDump, tol: Tolerance, *, trust_fingerprints: bool = False,
                 stored: list[RankDump] | None = None, jobs: int = 1) -> PairResult:
    """Compare every parameter of one rank pair. `stored`: the checkpoint slices of either side, against which
    tied copies that a checkpoint does not store are checked (see stored_copies). `jobs`: tensors compared at once
    (threads: numpy's kernels and the memory-mapped reads release the GIL), where both sides' readers allow it."""
    result = PairResult(coords_a=da.coords, coords_b=db.coords, source_a=str(da.source), source_b=str(db.source))
    names = list(da.tensors) + [n for n in db.tensors if n not in da.tensors]
    if da.whole != db.whole:  # the whole model against one rank: only the names that rank holds
        part = db if da.whole else da
        names = [n for n in names if n in part.tensors or n in part.unreadable or n in part.kept_names]
    else:
        names += [n for n in {**da.unreadable, **db.unreadable} if n not in da.tensors and n not in db.tensors]
    need_values = da.mode == "full" and db.mode == "full"
    elsewhere = StoredCopies(stored or [])
    try:
        if need_values:
            with open_values(da) as va, open_values(db) as vb:
                _compare_each(result, da, db, names, tol, va, vb, trust_fingerprints, elsewhere, jobs)
        else:
            _compare_each(result, da, db, names, tol, None, None, True, elsewhere, 1)
    except BadInput as e:  # a file could not be opened: nothing of this pair was compared
        result.errors.append(str(e))
        result.n_unreadable = len(names)
    finally:
        elsewhere.close()
    return result


def _compare_each(result: PairResult, da: RankDump, db: RankDump, names: list[str], tol: Tolerance, va, vb,
                  use_fingerprints: bool, elsewhere: StoredCopies, jobs: int) -> None:
    """Each name into a result of its own, added to `result` in the names' order (the same report whatever
    `jobs`): several at once where both readers are thread_safe."""
    def one(name: str) -> PairResult:
        part = PairResult(coords_a=result.coords_a, coords_b=result.coords_b, source_a=result.source_a,
                          source_b=result.source_b)
        try:
            _compare_one(part, da, db, name, tol, va, vb, use_fingerprints, elsewhere)
        except BadInput as e:  # this tensor could not be read; the others still are
            part.errors.append(str(e))
            part.n_unreadable += 1
        except (ValueError, TypeError, RuntimeError, NotImplementedError, OverflowError) as e:
            # a tensor numpy cannot hold (meta, sparse, quantized, 100 dimensions, 10**30 elements): named, unread
            part.errors.append(f"{name}: cannot be read as plain values ({type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}); not compared")
            part.n_unreadable += 1
        return part

    if jobs > 1 and len(names) > 1 and all(getattr(v, "thread_safe", False) for v in (va, vb)):
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            parts = list(pool.map(one, names))
    else:
        parts = map(one, names)
    for part in parts:
        _absorb(result, part)


def _absorb(result: PairResult, part: PairResult) -> None:
    result.diffs += part.diffs
    result.errors += part.errors
    result.nonfinite += part.nonfinite
    result.n_equal += part.n_equal
    result.n_compared += part.n_compared
    result.n_unreadable += part.n_unreadable
    result.elements += part.elements
    result.bytes_read += part.bytes_read


def _unread(dump: RankDump, name: str) -> bool:
    """The record `name`, or the value it is a leaf of (a DCP entry "rng_state/..." for "rng_state/....seed"),
    could not be read in `dump`: not compared, rather than "missing"."""
    if not dump.unreadable:
        return False
    return name in dump.unreadable or any(name[:i] in dump.unreadable for i, c in enumerate(name) if c == ".")


def _compare_one(result: PairResult, da: RankDump, db: RankDump, name: str, tol: Tolerance,
                 va, vb, use_fingerprints: bool, elsewhere: StoredCopies) -> None:
    if _unread(da, name) or _unread(db, name):  # already reported once, where it was read
        result.n_unreadable += 1
        return
    ma, mb = da.tensors.get(name), db.tensors.get(name)
    meta = ma or mb
    where = _where(da, db)
    base = dict(name=name, coords=where, module_class=meta.module_class, norm=norm_reason(meta), role=meta.role)
    if ma is None or mb is None:
        side_absent, present = (db, ma) if mb is None else (da, mb)
        kept = kept_as(side_absent, name) if name not in side_absent.absent else None
        if kept is not None:  # that side keeps it once, under another name: compare with that tensor
            label = "b" if mb is None else "a"
            if mb is None:
                mb, vb = side_absent.tensors[kept], RenamedValues(vb, {name: kept}) if vb is not None else None
            else:
                ma, va = side_absent.tensors[kept], RenamedValues(va, {name: kept}) if va is not None else None
            before = len(result.diffs)
            _compare_both(result, da, db, name, base, ma, mb, tol, va, vb, use_fingerprints)
            for diff in result.diffs[before:]:
                diff.note = "; ".join(x for x in (diff.note, f"{label} keeps it once, as {kept}") if x)
            return
        if name in side_absent.absent:
            checked = _against_stored_copy(base, name, present, ma is not None, va, vb, tol, elsewhere)
            if checked is not None:
                result.diffs.append(checked)
                return
            status, note = _absent_status(present, side_absent.absent[name])
        elif (partner := held_as_one_with(present, side_absent)) is not None:
            label, other = ("a", "b") if mb is None else ("b", "a")
            status, note = STORED_ONCE, (f"{other} does not hold it, but holds {partner}, which in {label} is the "
                                         f"same tensor (tied): compared under that name")
        else:
            status, note = (MISSING_B if mb is None else MISSING_A), ""
        result.diffs.append(ParamDiff(**base, status=status, note=note, numel=present.numel,
                                      shape_a=list(ma.shape) if ma else None, shape_b=list(mb.shape) if mb else None))
        return
    _compare_both(result, da, db, name, base, ma, mb, tol, va, vb, use_fingerprints)


def _compare_both(result: PairResult, da: RankDump, db: RankDump, name: str, base: dict, ma: TensorMeta,
                  mb: TensorMeta, tol: Tolerance, va, vb, use_fingerprints: bool) -> None:
    """One tensor that both sides hold (under `name`, or as the tensor one side keeps for it)."""
    where = base["coords"]
    shape, spec = ma.shape, None
    if ma.shape != mb.shape:
        spec = _shard_of(da, db, ma, mb)
        if spec is None:
            result.n_compared += 1
            result.diffs.append(ParamDiff(**base, status=SHAPE, shape_a=list(ma.shape), shape_b=list(mb.shape),
                                          dtype_a=ma.dtype, dtype_b=mb.dtype, numel=max(ma.numel, mb.numel)))
            result.errors.append(f"{where.label()}: {name} has shape {list(ma.shape)} in a, {list(mb.shape)} in b; "
                                 "values not compared")
            return
        shape = mb.shape if da.whole else ma.shape  # the shard's: compared with its part of the whole tensor
        if va is not None:
            va, vb = (ShardView(va, spec), vb) if da.whole else (va, ShardView(vb, spec))
    fa, fb = ma.fingerprint, mb.fingerprint
    if spec is None and use_fingerprints and tol.exact and fa is not None and fb is not None and ma.dtype == mb.dtype:
        if fa.sha256 == fb.sha256:
            result.n_compared += 1
            result.n_equal += 1
            return
        if va is None:
            result.n_compared += 1
            result.diffs.append(ParamDiff(**base, status=DIFFERS, numel=ma.numel, dtype_a=ma.dtype, dtype_b=mb.dtype,
                                          max_abs=abs(fa.absmax - fb.absmax), by_fingerprint=True,
                                          note=f"hashes differ; norm {fa.norm:.6g} -> {fb.norm:.6g}"))
            return
    if va is None:
        result.n_unreadable += 1
        result.diffs.append(ParamDiff(**base, status=UNREADABLE, numel=ma.numel,
                                      note="no values and no comparable fingerprints"))
        return
    vd = compare_tensor(va, vb, name, shape, tol, max(itemsize(ma.dtype), itemsize(mb.dtype)), (ma.dtype, mb.dtype))
    if vd.a_nonfinite or vd.b_nonfinite:
        result.nonfinite.append(f"{name} holds NaN or inf: {vd.a_nonfinite:,} element(s) in a, {vd.b_nonfinite:,} in "
                                f"b (of {vd.numel:,})")
    numel = math.prod(shape)
    result.n_compared += 1
    result.elements += numel
    result.bytes_read += numel * (itemsize(ma.dtype) + itemsize(mb.dtype))
    if vd.n_differ == 0 and (ma.dtype == mb.dtype or tol.rounded):
        result.n_equal += 1
        return
    diff = _from_values(base, vd, ma, mb)
    if spec is not None:
        diff.first_index, diff.max_index = spec.whole_index(diff.first_index), spec.whole_index(diff.max_index)
        diff.note = "; ".join(x for x in (diff.note, spec.describe()) if x)
    result.diffs.append(diff)


def _shard_of(da: RankDump, db: RankDump, ma: TensorMeta, mb: TensorMeta):
    """Where one side's tensor-parallel shard lies in the other side's whole tensor, or None."""
    if da.whole == db.whole:
        return None
    (whole, part), part_dump = ((ma, mb), db) if da.whole else ((mb, ma), da)
    return shard_spec(whole.shape, part.shape, part_dump.coords.tp, part_dump.dims.tp if part_dump.dims else 1)


def _against_stored_copy(base: dict, name: str, present: TensorMeta, present_in_a: bool, va, vb, tol: Tolerance,
                         elsewhere: StoredCopies) -> ParamDiff | None:
    """A dumped tied copy that the checkpoint side lacks, compared with the copy the checkpoint stores."""
    if present.tie is None:
        return None  # not a tied copy: nothing else restores it; a tensor one side lacks is missing there
    if not present.tie.synced:
        return None  # never broadcast at load: it keeps its initial values whatever the stored copy holds
    stored = elsewhere.find(name, base["coords"].tp)
    values = va if present_in_a else vb
    if stored is None or values is None or stored.tensors[name].shape != present.shape:
        return None
    vs = elsewhere.values(stored)
    pp = stored.coords.pp
    kept = stored.tensors[name].dtype
    if present_in_a:
        vd = compare_tensor(values, vs, name, present.shape, tol, itemsize(present.dtype), (present.dtype, kept))
    else:
        vd = compare_tensor(vs, values, name, present.shape, tol, itemsize(present.dtype), (kept, present.dtype))
    if vd.n_differ == 0:
        return ParamDiff(**base, status=RESTORED, numel=present.numel,
                         note=f"this stage's tied copy is not stored; it equals the stored pp={pp} copy, "
                              "which DeepSpeed broadcasts to it at load")
    diff = _from_values(base, vd, present, stored.tensors[name])
    if present_in_a:
        diff.note = (f"this stage's tied copy is not stored, and differs from the stored pp={pp} copy that will "
                     "replace it at load: the copies had drifted apart before the save")
    else:
        diff.note = (f"this stage's tied copy is not stored, and was not restored at load: it differs from the "
                     f"stored pp={pp} copy")
    return diff


def _from_values(base: dict, vd: ValueDiff, ma: TensorMeta, mb: TensorMeta) -> ParamDiff:
    reset = None
    if vd.n_differ and vd.b_constant is not None and vd.a_constant != vd.b_constant and base["role"] != "value":
        reset = "ones" if vd.b_constant == 1.0 else "zeros"  # a value (a size, a step) of 1 is no initialisation
    return ParamDiff(
        **base, status=DIFFERS if vd.n_differ else DTYPE, numel=vd.numel, n_differ=vd.n_differ,
        max_abs=vd.max_abs, mean_abs=vd.mean_abs, fraction=vd.fraction,
        first_index=list(vd.first_index) if vd.first_index is not None else None,
        max_index=list(vd.max_index) if vd.max_index is not None else None,
        shape_a=list(ma.shape), shape_b=list(mb.shape), dtype_a=ma.dtype, dtype_b=mb.dtype, reset_to=reset,
        note="; ".join(x for x in (f"dtype {ma.dtype} -> {mb.dtype}" if ma.dtype != mb.dtype else "",
                                   _nonfinite_note(vd)) if x),
    )


def _nonfinite_note(vd: ValueDiff) -> str:
    if not (vd.a_nonfinite or vd.b_nonfinite):
        return ""
    return (f"NaN or inf in {vd.a_nonfinite:,} element(s) of a and {vd.b_nonfinite:,} of b (a NaN against a number "
            "counts as an inf difference)")


def compare_selections(a: Selection, b: Selection, tol: Tolerance, *, jobs: int = 2,
                       trust_fingerprints: bool = False) -> tuple[list[PairResult], list[RankDump], list[RankDump]]:
    pairs, only_a, only_b = pair_keys(a, b)
    stored = [d for d in list(a.dumps.values()) + list(b.dumps.values()) if d.replicated_dp]

    inner = max(1, jobs // max(1, len(pairs)))  # fewer pairs than jobs: the rest split each pair by tensor

    def one(pair: tuple[RankDump, RankDump]) -> PairResult:
        return compare_pair(pair[0], pair[1], tol, trust_fingerprints=trust_fingerprints, stored=stored, jobs=inner)

    if jobs <= 1 or len(pairs) <= 1:
        results = [one(p) for p in pairs]
    else:  # numpy's kernels and the memory-mapped reads release the GIL
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, pairs))
    for extra in _not_covered(a, b):  # reported with the first pair, not counted as a pair of its own
        if results:
            results[0].diffs.extend(extra.diffs)
        else:
            results.append(extra)
    return results, only_a, only_b


def _not_covered(a: Selection, b: Selection) -> list[PairResult]:
    """A whole-model side against ranks: the names that no rank of the other side holds, as missing there."""
    wa, wb = single_whole(a), single_whole(b)
    if (wa is None) == (wb is None):
        return []
    whole, others = (wa, b) if wa is not None else (wb, a)
    held = {n for d in others.dumps.values() for n in (*d.tensors, *d.absent, *d.unreadable, *d.kept_names)}
    missing = [n for n in whole.tensors if n not in held]
    if not missing:
        return []
    result = PairResult(coords_a=whole.coords, coords_b=whole.coords, source_a=str(a.path), source_b=str(b.path))
    label, other = ("a", "b") if wa is not None else ("b", "a")
    for name in missing:
        meta = whole.tensors[name]
        partner = next((p for d in others.dumps.values() if (p := held_as_one_with(meta, d)) is not None), None)
        if partner is not None:
            status, note = STORED_ONCE, (f"no rank of {other} holds it, but {partner}, which in {label} is the same "
                                         "tensor (tied), is held and compared under that name")
        else:
            status = MISSING_B if wa is not None else MISSING_A
            note = "held by no rank of the other side (names differ? see --name-map)"
        result.diffs.append(ParamDiff(name=name, status=status, coords=whole.coords, numel=meta.numel,
                                      role=meta.role, note=note))
    return [result]
