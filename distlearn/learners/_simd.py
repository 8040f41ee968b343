"""Explicit SIMD loops for the kernels, written as LLVM IR (numba intrinsics).

numba leaves LLVM's SLP vectoriser off and will not keep a runtime number of
accumulators in registers, so a margin loop written in Python either stays
scalar or keeps its sums in memory.  These intrinsics emit the loop directly:
the sums of up to ``4 * NG`` output columns live in ``NG`` vector registers of
4 lanes (of W's dtype), and every step is *lane-wise* -- lane ``c`` computes exactly
the sequential sum of its own column, in the same order and with the same
roundings as the scalar loop it replaces (IEEE arithmetic is the same in a
vector lane; nothing is reassociated, nothing is fused into an FMA).

Lanes past the last column are masked (``llvm.masked.load``/``store``), so nothing
outside the arrays is read or written.  Vector registers of 4 doubles exist on every
x86-64 with AVX and on AArch64 (as pairs of 2); LLVM lowers the masked operations to
what the target has.

:func:`dense_margins_pair` sums two rows in one pass over W (the dense kernel's
speculative next row, in float64: one epoch 0.096 -> 0.092 s; slower in float32).
Measured on Fashion-MNIST (60,000 x 784, K = 10, benchmarks/bench_learners.py), and
left out for that reason: 8-lane (512-bit) groups, one fused pass updating every
firing column of a feature at once (masked or select-and-store vector updates: both
slower than one strided pass per firing column), a list of the nonzero blocks kept
for the update, and compacting the row's nonzeros before the update.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: float64 lanes per vector register the loops use.
LANES = 4
#: The all-zero test of the dense margin loop covers this many features at once.
SKIP = 4

_I1 = ir.IntType(1)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F64 = ir.DoubleType()


def _suffix(et: ir.Type) -> str:
    return "f64" if et == _F64 else "f32"


def _masked_load(builder, ptr, vty, mask):
    n = vty.count
    fnty = ir.FunctionType(vty, [vty.as_pointer(), _I32, ir.VectorType(_I1, n), vty])
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.masked.load.v{n}{_suffix(vty.element)}.p0")
    return builder.call(fn, [builder.bitcast(ptr, vty.as_pointer()), _I32(1), mask, ir.Constant(vty, [0.0] * n)])


def _masked_store(builder, val, ptr, mask):
    vty = val.type
    n = vty.count
    fnty = ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), _I32, ir.VectorType(_I1, n)])
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.masked.store.v{n}{_suffix(vty.element)}.p0")
    builder.call(fn, [val, builder.bitcast(ptr, vty.as_pointer()), _I32(1), mask])


def _splat(builder, v, n):
    vty = ir.VectorType(v.type, n)
    undef = ir.Constant(vty, None)
    one = builder.insert_element(undef, v, _I32(0))
    return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(_I32, n), [0] * n))


def _lane_mask(builder, n_valid, start):
    """Lane ``l`` is on iff ``start + l < n_valid``."""
    lanes = ir.Constant(ir.VectorType(_I64, LANES), list(range(LANES)))
    return builder.icmp_signed("<", lanes, _splat(builder, builder.sub(n_valid, start), LANES))


def _margins_codegen(NG: int, R: int):
    """LLVM IR of the margin loop over ``R`` rows (1 or 2) sharing each load of W.

    Arguments as in :func:`dense_margins` (R = 1) or :func:`dense_margins_pair` (R = 2):
    ``w, K, k0, xf``, then the rows' offsets, ``d``, then the rows' sum arrays."""

    def codegen(context, builder, signature, args):
        tys = signature.args
        wa = context.make_array(tys[0])(context, builder, args[0])
        xa = context.make_array(tys[3])(context, builder, args[3])
        los = [context.cast(builder, args[4 + r], tys[4 + r], types.int64) for r in range(R)]
        dv = context.cast(builder, args[4 + R], tys[4 + R], types.int64)
        outs = [context.make_array(tys[5 + R + r])(context, builder, args[5 + R + r]) for r in range(R)]
        Kv = context.cast(builder, args[1], tys[1], types.int64)
        k0v = context.cast(builder, args[2], tys[2], types.int64)
        et = context.get_data_type(tys[0].dtype)
        vty = ir.VectorType(et, LANES)
        dvty = ir.VectorType(_F64, LANES)
        bty = ir.VectorType(et, SKIP)
        left = builder.sub(Kv, k0v)
        masks = [_lane_mask(builder, left, _I64(g * LANES)) for g in range(NG)]
        zero = ir.Constant(vty, [0.0] * LANES)
        # promoted to registers: accs[r][g] holds lanes 4g .. 4g + 3 of row r, in W's dtype
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(NG)] for _ in range(R)]

        def step(j, xvs):
            xss = [_splat(builder, xv, LANES) for xv in xvs]
            base = builder.add(builder.mul(j, Kv), k0v)
            for g in range(NG):
                wv = _masked_load(builder, builder.gep(wa.data, [builder.add(base, _I64(g * LANES))]), vty, masks[g])
                for r in range(R):
                    prod = builder.fmul(wv, xss[r])
                    builder.store(builder.fadd(builder.load(accs[r][g]), prod), accs[r][g])

        nb = builder.sdiv(dv, _I64(SKIP))
        zb = ir.Constant(bty, [0.0] * SKIP)
        with cgutils.for_range(builder, nb) as loop:
            j0 = builder.mul(loop.index, _I64(SKIP))
            xbs = [builder.load(builder.bitcast(builder.gep(xa.data, [builder.add(lo, j0)]), bty.as_pointer()),
                                align=1) for lo in los]
            nz = None
            for xb in xbs:
                bits = builder.bitcast(builder.fcmp_unordered("!=", xb, zb), ir.IntType(SKIP))
                nz = bits if nz is None else builder.or_(nz, bits)
            with builder.if_then(builder.icmp_unsigned("!=", nz, ir.IntType(SKIP)(0)), likely=True):
                for t in range(SKIP):
                    step(builder.add(j0, _I64(t)), [builder.extract_element(xb, _I32(t)) for xb in xbs])
        tail0 = builder.mul(nb, _I64(SKIP))
        with cgutils.for_range(builder, builder.sub(dv, tail0)) as loop:
            j = builder.add(tail0, loop.index)
            step(j, [builder.load(builder.gep(xa.data, [builder.add(lo, j)])) for lo in los])
        for r in range(R):
            for g in range(NG):
                sums = builder.load(accs[r][g])
                if et != _F64:
                    sums = builder.fpext(sums, dvty)  # exact: the sum arrays are float64
                _masked_store(builder, sums,
                              builder.gep(outs[r].data, [builder.add(k0v, _I64(g * LANES))]), masks[g])
        return context.get_dummy_value()

    return codegen


def _margin_types_ok(w, xf, *accs) -> bool:
    return (isinstance(w, types.Array) and isinstance(xf, types.Array) and w.dtype == xf.dtype
            and w.dtype in (types.float32, types.float64)
            and all(isinstance(a, types.Array) and a.dtype == types.float64 for a in accs))


def _make_dense_margins(NG: int):
    @intrinsic
    def dense_margins(typingctx, w, K, k0, xf, lo, d, acc):
        """``acc[k0 + c] = sum_j w[j * K + k0 + c] * xf[lo + j]`` over ``j = 0 .. d - 1`` in order,
        for the columns ``c < min(4 * NG, K - k0)``: each a sequential sum from +0.0, products and
        sums in the arrays' dtype (stored widened to float64) -- the scalar loop's value bit for bit.

        The zeros of the row are summed too, which changes nothing: a zero feature's term is
        ``w * 0 = +-0``, and adding +-0 leaves any sum that started at +0.0 as it was (such a sum
        is never -0.0) -- while ``w`` is finite; a non-finite ``w`` makes the term NaN, and the
        caller then recomputes that row's margins over the nonzeros only.  So a finite result is
        the sum over the row's nonzeros, the CSR kernel's value.  Blocks of :data:`SKIP` features
        that are all zero are skipped altogether (a quarter to a third of an image's pixels sit in
        blank blocks).  Only ``acc[k0 : min(K, k0 + 4 * NG)]`` is written (masked stores).
        """
        if not _margin_types_ok(w, xf, acc):
            return None
        return types.void(w, K, k0, xf, lo, d, acc), _margins_codegen(NG, 1)

    return dense_margins


def _make_dense_margins_pair(NG: int):
    @intrinsic
    def dense_margins_pair(typingctx, w, K, k0, xf, lo, lo2, d, acc, acc2):
        """:func:`dense_margins` of two rows at once, ``xf[lo:lo + d]`` into ``acc`` and
        ``xf[lo2:lo2 + d]`` into ``acc2``: each of W's vectors is loaded once and feeds both
        rows' sums, and the two rows' sums are independent chains.  Every lane of each row is
        still its own sequential sum in feature order, bit for bit what :func:`dense_margins`
        gives (a block of :data:`SKIP` features is skipped only when it is zero in both rows;
        the zeros summed in its place add +-0, which changes no finite sum, as there)."""
        if not _margin_types_ok(w, xf, acc, acc2):
            return None
        return types.void(w, K, k0, xf, lo, lo2, d, acc, acc2), _margins_codegen(NG, 2)

    return dense_margins_pair


dense_margins_1 = _make_dense_margins(1)
dense_margins_2 = _make_dense_margins(2)
dense_margins_3 = _make_dense_margins(3)
dense_margins_4 = _make_dense_margins(4)
dense_margins_pair_1 = _make_dense_margins_pair(1)
dense_margins_pair_2 = _make_dense_margins_pair(2)
dense_margins_pair_3 = _make_dense_margins_pair(3)
dense_margins_pair_4 = _make_dense_margins_pair(4)


#: float64 lanes per vector of the gathered score sums (:func:`gather_sums`): 8, so the 26 columns of a
#: LETTER problem take 4 vectors and six rows' sums (24 registers) stay in the 32 vector registers of AVX-512
#: (LLVM splits them in two on a target with 16 registers of 4 lanes, the same lanes and the same bits).
GATHER_LANES = 8
#: Rows whose sums :func:`gather_sums` keeps in registers in one pass over the coefficients.
GATHER_ROWS = 6


def _gather_loop(context, builder, tys, args, NG: int, R: int, tail: int = GATHER_LANES):
    """The IR of one :func:`gather_sums` variant: ``NG`` groups of columns, ``R`` rows; every group a vector of
    :data:`GATHER_LANES` lanes but the last, of ``tail`` lanes (a narrower vector for the last columns: at
    K = 26 the 26th column ends 2 lanes into the fourth group, and 6 idle lanes per row cost as much as busy ones)."""
    L = GATHER_LANES
    widths = [L] * (NG - 1) + [tail]
    wa = context.make_array(tys[0])(context, builder, args[0])
    Kv = context.cast(builder, args[1], tys[1], types.int64)
    k0 = context.cast(builder, args[2], tys[2], types.int64)
    ia = context.make_array(tys[4])(context, builder, args[4])
    aa = context.make_array(tys[5])(context, builder, args[5])
    i0 = context.cast(builder, args[6], tys[6], types.int64)
    i1 = context.cast(builder, args[7], tys[7], types.int64)
    ga = context.make_array(tys[8])(context, builder, args[8])
    oa = context.make_array(tys[9])(context, builder, args[9])
    r0 = context.cast(builder, args[10], tys[10], types.int64)
    outa = context.make_array(tys[12])(context, builder, args[12])
    vtys = [ir.VectorType(_F64, n) for n in widths]
    left = builder.sub(Kv, k0)
    masks = [builder.icmp_signed("<", ir.Constant(ir.VectorType(_I64, n), list(range(n))),
                                 _splat(builder, builder.sub(left, _I64(q * L)), n)) for q, n in enumerate(widths)]
    offs = [builder.load(builder.gep(oa.data, [builder.add(r0, _I64(r))])) for r in range(R)]

    def out_ptr(r, q):
        return builder.gep(outa.data, [builder.add(builder.mul(builder.add(r0, _I64(r)), Kv),
                                                   builder.add(k0, _I64(q * L)))])

    # the running sums, promoted to registers: loaded from out, stored back at the end (exact)
    accs = [[cgutils.alloca_once_value(builder, _masked_load(builder, out_ptr(r, q), vtys[q], masks[q]))
             for q in range(NG)] for r in range(R)]
    with cgutils.for_range(builder, builder.sub(i1, i0)) as loop:
        i = builder.add(loop.index, i0)
        live = builder.load(builder.gep(aa.data, [i]))
        with builder.if_then(builder.icmp_unsigned("!=", live, ir.Constant(live.type, 0)), likely=True):
            p = builder.load(builder.gep(ia.data, [i]))
            gv = [builder.load(builder.gep(ga.data, [builder.add(offs[r], p)])) for r in range(R)]
            gs = {n: [_splat(builder, v, n) for v in gv] for n in set(widths)}
            base = builder.add(builder.mul(i, Kv), k0)
            for q, n in enumerate(widths):
                wv = _masked_load(builder, builder.gep(wa.data, [builder.add(base, _I64(q * L))]), vtys[q], masks[q])
                for r in range(R):
                    builder.store(builder.fadd(builder.load(accs[r][q]), builder.fmul(wv, gs[n][r])), accs[r][q])
    for r in range(R):
        for q in range(NG):
            _masked_store(builder, builder.load(accs[r][q]), out_ptr(r, q), masks[q])


#: The column groups (of :data:`GATHER_LANES`) a :func:`gather_sums` call may take.
GATHER_GROUPS = (1, 2, 4)


def _gather_codegen(context, builder, signature, args):
    """:func:`gather_sums`: one loop per (groups, rows) pair, chosen by a switch on ``ng * 8 + R``."""
    tys = signature.args
    ng = context.cast(builder, args[3], tys[3], types.int64)
    R = context.cast(builder, args[11], tys[11], types.int64)
    key = builder.add(builder.mul(ng, _I64(8)), R)
    NG = GATHER_GROUPS[-1]
    left = builder.sub(context.cast(builder, args[1], tys[1], types.int64),
                       context.cast(builder, args[2], tys[2], types.int64))
    narrow = builder.and_(builder.icmp_signed("==", ng, _I64(NG)),
                          builder.icmp_signed("<=", left, _I64((NG - 1) * GATHER_LANES + 2)))
    key = builder.select(narrow, builder.add(R, _I64(24)), key)
    done = builder.append_basic_block("gather.done")
    sw = builder.switch(key, done)
    for NG in GATHER_GROUPS:
        for r in range(1, GATHER_ROWS + 1):
            blk = builder.append_basic_block(f"gather.{NG}.{r}")
            sw.add_case(_I64(NG * 8 + r), blk)
            builder.position_at_end(blk)
            _gather_loop(context, builder, tys, args, NG, r)
            builder.branch(done)
    # the widest calls whose last group holds at most 2 columns: that group a vector of 2 lanes
    # (case 24 + R: ng = 3 is not a group count)
    NG = GATHER_GROUPS[-1]
    for r in range(1, GATHER_ROWS + 1):
        blk = builder.append_basic_block(f"gather.{NG}.{r}.narrow")
        sw.add_case(_I64(24 + r), blk)
        builder.position_at_end(blk)
        _gather_loop(context, builder, tys, args, NG, r, 2)
        builder.branch(done)
    builder.position_at_end(done)
    return context.get_dummy_value()


@intrinsic
def gather_sums(typingctx, w, K, k0, ng, idx, alive, i0, i1, g, offs, r0, R, out):
    """Score sums of ``R`` rows (1 .. :data:`GATHER_ROWS`) over the live slots ``i0 <= i < i1`` with each slot's
    kernel value gathered: ``out[(r0 + r) * K + k] += w[i * K + k] * g[offs[r0 + r] + idx[i]]`` for every slot
    ``i`` with ``alive[i]``, in slot order, for ``r < R`` and the columns ``k0 <= k < min(K, k0 + 8 ng)``
    (``ng`` in :data:`GATHER_GROUPS`; any other ``ng`` or ``R`` does nothing).

    Every lane is its own sequential sum (loaded from ``out``, the products added one slot at a time in
    order, stored back), with the scalar loop's roundings: nothing fused or reassociated, so with ``out``
    zeroed first and the whole slot range in one call or in consecutive calls the result is bit for bit
    ``sum_{i live} A[i, k] g_i`` as the engines' per-round loops sum it.  A dead slot is skipped (the sum over
    the live slots, whatever its coefficients hold).  The kernel OBPM's members gather from the pool's kernel
    rows (``idx`` the slot -> pool map); the coefficients are read once for ``R`` rows
    (``benchmarks/README.md``, "Round 4").
    """
    if not (isinstance(w, types.Array) and w.dtype == types.float64 and isinstance(g, types.Array)
            and g.dtype == types.float64 and isinstance(out, types.Array) and out.dtype == types.float64):
        return None
    return types.void(w, K, k0, ng, idx, alive, i0, i1, g, offs, r0, R, out), _gather_codegen
