/* index.c — index arithmetic that keeps views affine. An index is flattened into terms
 * (atom x coefficient, coefficients being Dims: k * symbols), simplified, and rebuilt in
 * one canonical order. Division and remainder by a constant vanish when the terms allow
 * (x*C + c with 0 <= c < C: / C is x, % C is c), and a remainder paired with its quotient
 * folds back (x/C*C*s + x%C*s is x*s): so reshaping a dense buffer, or flattening loops
 * into one, costs no div/mod in the loads. Every index is non-negative (loop.h). */
#include "codegen/kernel_expr.h"

#define LIN_MAX 64

typedef struct Term {
    int atom; /* an lx id; -1: the constant term, whose value is coef */
    Dim coef;
} Term;

typedef struct Lin {
    Term t[LIN_MAX];
    int n;
    bool full; /* too many terms: the caller falls back to plain arithmetic */
} Lin;

/* ---------------------------------------------------------------- dims */

/* A symbol's power in a Dim: 0, 1 or 2 (squared). */
static int power(Dim d, int s) { return (d.syms >> s & 1) + (d.sq >> s & 1); }

static Dim with_powers(int64_t k, const int *pow)
{
    Dim d = {k, 0, 0};
    for (int s = 0; s < COIL_MAX_SYMS; s++) {
        d.syms |= (uint32_t)(pow[s] >= 1) << s;
        d.sq |= (uint32_t)(pow[s] >= 2) << s;
    }
    return d;
}

/* Products of up to two of one symbol are Dims; a cube is not (false). */
bool dim_times(Dim a, Dim b, Dim *out)
{
    int pow[COIL_MAX_SYMS];
    int64_t k;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if ((pow[s] = power(a, s) + power(b, s)) > 2)
            return false;
    if (__builtin_mul_overflow(a.k, b.k, &k))
        return false;
    *out = with_powers(k, pow);
    return true;
}

bool dim_divides(Dim d, Dim c)
{
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if (power(d, s) > power(c, s))
            return c.k == 0 && d.k != 0;
    return d.k != 0 && c.k % d.k == 0;
}

Dim dim_quot(Dim c, Dim d)
{
    int pow[COIL_MAX_SYMS];
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        pow[s] = power(c, s) - power(d, s);
    return with_powers(c.k / d.k, pow);
}

bool type_size(const Type *t, Dim *out)
{
    *out = dim_static(1);
    for (int d = 0; d < t->rank; d++)
        if (!dim_times(*out, t->dim[d], out))
            return false;
    return true;
}

static bool is_one(Dim d) { return d.k == 1 && d.syms == 0; }

/* ---------------------------------------------------------------- terms */

static void add_term(Lin *l, int atom, Dim coef)
{
    if (coef.k == 0)
        return;
    for (int i = 0; i < l->n; i++)
        if (l->t[i].atom == atom && l->t[i].coef.syms == coef.syms && l->t[i].coef.sq == coef.sq) {
            l->t[i].coef.k += coef.k;
            if (l->t[i].coef.k == 0)
                l->t[i] = l->t[--l->n];
            return;
        }
    if (l->n == LIN_MAX) {
        l->full = true;
        return;
    }
    l->t[l->n++] = (Term){atom, coef};
}

static bool has_dimval(const KB *kb, int id) { return kb->dimval[id].k != INT64_MIN; }

/* A subexpression still to flatten, times scale. */
typedef struct Pending {
    int id;
    Dim scale;
} Pending;

#define COLLECT_STACK (4 * LIN_MAX)

/* Add scale * id, flattening sums and products by constants: a walk with its own small
 * stack (operands in the order a recursion would take them). A subexpression the stack
 * has no room for stays a term of its own: still exact, only less simplified. */
static void collect(const KB *kb, int root, Dim scale0, Lin *l)
{
    Pending st[COLLECT_STACK];
    int sp = 0;
    st[sp++] = (Pending){root, scale0};
    while (sp) {
        Pending it = st[--sp];
        const Lx *x = &kb->lx[it.id];
        Dim prod;
        if (has_dimval(kb, it.id)) {
            if (dim_times(kb->dimval[it.id], it.scale, &prod)) {
                add_term(l, -1, prod);
                continue;
            }
        } else if (x->kind == LX_BINARY && x->dt == DT_I64 && x->op == OP_ADD &&
                   sp + 2 <= COLLECT_STACK) {
            st[sp++] = (Pending){x->b, it.scale};
            st[sp++] = (Pending){x->a, it.scale};
            continue;
        } else if (x->kind == LX_BINARY && x->dt == DT_I64 && x->op == OP_MUL) {
            bool done = false;
            for (int side = 0; side < 2 && !done; side++) {
                int c = side ? x->a : x->b, other = side ? x->b : x->a;
                if (has_dimval(kb, c) && dim_times(kb->dimval[c], it.scale, &prod)) {
                    st[sp++] = (Pending){other, prod};
                    done = true;
                }
            }
            if (done)
                continue;
        }
        add_term(l, it.id, it.scale);
    }
}

/* ---------------------------------------------------------------- bounds */

/* An exclusive upper bound of the terms' sum as a Dim, when one can be shown: all
 * static, or a mixed radix (each coefficient the previous one times its atom's extent,
 * the lowest one 1), whose bound is the top coefficient times its extent. */
static bool bound_of(const KB *kb, const Term *t, int n, Dim *bound)
{
    int64_t sum = 0;
    bool all_static = true;
    for (int i = 0; i < n; i++) {
        Dim e = t[i].atom < 0 ? dim_static(1) : kb->extent[t[i].atom];
        if (t[i].coef.k < 0 || e.k < 0)
            return false;
        if (!dim_is_static(t[i].coef) || !dim_is_static(e))
            all_static = false;
        else
            sum += t[i].coef.k * (t[i].atom < 0 ? 1 : e.k - 1);
    }
    if (all_static) {
        *bound = dim_static(sum + 1);
        return true;
    }
    /* mixed radix: order by coefficient, lowest first (selection; n is small) */
    Term s[LIN_MAX];
    for (int i = 0; i < n; i++)
        s[i] = t[i];
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (dim_divides(s[j].coef, s[i].coef) && !dim_eq(s[i].coef, s[j].coef)) {
                Term tmp = s[i];
                s[i] = s[j];
                s[j] = tmp;
            }
    if (n == 0 || s[0].atom < 0 || !is_one(s[0].coef))
        return false;
    for (int i = 0; i + 1 < n; i++) {
        Dim next;
        if (s[i + 1].atom < 0 || !dim_times(s[i].coef, kb->extent[s[i].atom], &next) ||
            !dim_eq(next, s[i + 1].coef))
            return false;
    }
    return dim_times(s[n - 1].coef, kb->extent[s[n - 1].atom], bound);
}

/* The terms lie in [0, d). */
static bool below(const KB *kb, const Term *t, int n, Dim d)
{
    Dim b;
    if (n == 0)
        return true;
    if (!bound_of(kb, t, n, &b))
        return false;
    if (dim_is_static(b) && dim_is_static(d))
        return b.k <= d.k;
    return dim_divides(b, d);
}

static bool non_negative(const Lin *l)
{
    for (int i = 0; i < l->n; i++)
        if (l->t[i].coef.k < 0)
            return false;
    return true;
}

/* ---------------------------------------------------------------- rebuilding */

static int cmp_term(const Term *a, const Term *b)
{
    if (a->atom != b->atom)
        return a->atom < b->atom ? -1 : 1;
    if (a->coef.syms != b->coef.syms)
        return a->coef.syms < b->coef.syms ? -1 : 1;
    if (a->coef.sq != b->coef.sq)
        return a->coef.sq < b->coef.sq ? -1 : 1;
    return 0;
}

static int emit_sorted(KB *kb, Term *t, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: canonical order for hash-consing */
        for (int j = i; j > 0 && cmp_term(&t[j], &t[j - 1]) < 0; j--) {
            Term tmp = t[j];
            t[j] = t[j - 1];
            t[j - 1] = tmp;
        }
    int sum = -1;
    Dim bound;
    for (int i = 0; i < n; i++) {
        int v = t[i].atom < 0 ? lx_dim(kb, t[i].coef)
                : is_one(t[i].coef) ? t[i].atom
                : lx_index_node(kb, LX_BINARY, OP_MUL, t[i].atom, lx_dim(kb, t[i].coef),
                                LX_NO_EXTENT, LX_NO_VALUE);
        sum = sum < 0 ? v : lx_index_node(kb, LX_BINARY, OP_ADD, sum, v, LX_NO_EXTENT, LX_NO_VALUE);
    }
    if (sum < 0)
        return lx_int(kb, 0);
    if (bound_of(kb, t, n, &bound) && !kb->oom)
        kb->extent[sum] = bound;
    return sum;
}

static int ix_divmod(KB *kb, int a, Dim d, bool mod);

/* x%C*s next to x/C*(C*s) is x*s: undo the split of a dim that was merged. */
static void fold_divmod(KB *kb, Lin *l)
{
    for (bool again = true; again && !kb->oom;) {
        again = false;
        for (int i = 0; i < l->n && !again; i++) {
            const Lx *x = l->t[i].atom >= 0 ? &kb->lx[l->t[i].atom] : NULL;
            if (!x || x->kind != LX_IMOD || !has_dimval(kb, x->b))
                continue;
            Dim c = kb->dimval[x->b], m = l->t[i].coef, want;
            int y = x->a, q = ix_divmod(kb, y, c, false);
            if (q < 0 || !dim_times(m, c, &want))
                continue;
            for (int j = 0; j < l->n; j++)
                if (l->t[j].atom == q && dim_eq(l->t[j].coef, want)) {
                    Term ti = l->t[i];
                    l->t[j] = l->t[--l->n]; /* remove j, then i (its index may have moved) */
                    for (int k = 0; k < l->n; k++)
                        if (l->t[k].atom == ti.atom && dim_eq(l->t[k].coef, ti.coef)) {
                            l->t[k] = l->t[--l->n];
                            break;
                        }
                    collect(kb, y, m, l);
                    again = true;
                    break;
                }
        }
    }
}

static int emit(KB *kb, Lin *l)
{
    fold_divmod(kb, l);
    return l->full ? -1 : emit_sorted(kb, l->t, l->n);
}

/* ---------------------------------------------------------------- the algebra */

int ix_add(KB *kb, int a, int b)
{
    if (a < 0 || b < 0 || kb->oom)
        return -1;
    Lin l = {.n = 0};
    collect(kb, a, dim_static(1), &l);
    collect(kb, b, dim_static(1), &l);
    return l.full ? lx_index_node(kb, LX_BINARY, OP_ADD, a, b, LX_NO_EXTENT, LX_NO_VALUE) : emit(kb, &l);
}

int ix_sub_dim(KB *kb, int a, Dim d)
{
    if (a < 0 || kb->oom)
        return -1;
    Lin l = {.n = 0};
    collect(kb, a, dim_static(1), &l);
    add_term(&l, -1, (Dim){-d.k, d.syms, d.sq});
    return l.full ? -1 : emit(kb, &l);
}

int ix_mul(KB *kb, int a, Dim c)
{
    if (a < 0 || kb->oom)
        return -1;
    Lin l = {.n = 0};
    collect(kb, a, c, &l);
    return l.full ? lx_index_node(kb, LX_BINARY, OP_MUL, a, lx_dim(kb, c), LX_NO_EXTENT, LX_NO_VALUE)
                  : emit(kb, &l);
}

/* A plain LX_IDIV / LX_IMOD with its bound: a quotient's extent divides by d when it can. */
static int raw_divmod(KB *kb, int a, Dim d, bool mod)
{
    const Lx *x = &kb->lx[a];
    Dim dd;
    while (!mod && x->kind == LX_IDIV && has_dimval(kb, x->b) && dim_times(kb->dimval[x->b], d, &dd)) {
        a = x->a, d = dd, x = &kb->lx[a]; /* (y / a) / d is y / (a d) */
    }
    Dim e = kb->extent[a], ext = LX_NO_EXTENT;
    if (mod)
        ext = d;
    else if (e.k >= 0 && dim_divides(d, e))
        ext = dim_quot(e, d);
    else if (e.k >= 0 && dim_is_static(e) && dim_is_static(d))
        ext = dim_static((e.k + d.k - 1) / d.k);
    return lx_index_node(kb, mod ? LX_IMOD : LX_IDIV, 0, a, lx_dim(kb, d), ext, LX_NO_VALUE);
}

/* A factor c of d (1 < c < d) that every term's coefficient is a multiple of, but for
 * terms that stay below c: then a / d is (a / c) / (d / c) and a % d is
 * (a / c) % (d / c) * c + a % c, each part simplifying further ((6 v + w) / 24 with
 * w < 6 is v / 4). A dim merged then split a different way folds back through it. */
static bool common_factor(const KB *kb, const Lin *l, Dim d, Dim *c)
{
    for (int i = 0; i < l->n; i++) {
        Dim f = l->t[i].coef;
        if (f.k <= 1 || !dim_divides(f, d) || dim_eq(f, d))
            continue;
        Term rest[LIN_MAX];
        int nrest = 0;
        for (int j = 0; j < l->n; j++)
            if (!dim_divides(f, l->t[j].coef))
                rest[nrest++] = l->t[j];
        if (below(kb, rest, nrest, f)) {
            *c = f;
            return true;
        }
    }
    return false;
}

/* a / d or a % d: terms that are multiples of d go to the quotient, the rest stays below
 * d when it can be shown, so no division is left. */
static int ix_divmod(KB *kb, int a, Dim d, bool mod)
{
    if (a < 0 || kb->oom || d.k <= 0)
        return -1;
    if (is_one(d))
        return mod ? lx_int(kb, 0) : a;
    Lin l = {.n = 0}, q = {.n = 0}, r = {.n = 0};
    collect(kb, a, dim_static(1), &l);
    if (l.full || !non_negative(&l))
        return raw_divmod(kb, a, d, mod);
    for (int i = 0; i < l.n; i++) {
        if (dim_divides(d, l.t[i].coef))
            add_term(&q, l.t[i].atom, dim_quot(l.t[i].coef, d));
        else
            add_term(&r, l.t[i].atom, l.t[i].coef);
    }
    bool small = below(kb, r.t, r.n, d);
    Dim c;
    if (!small && common_factor(kb, &r, d, &c)) {
        int inner = ix_divmod(kb, emit(kb, &r), c, false), outer = ix_divmod(kb, inner, dim_quot(d, c), mod);
        if (!mod)
            return q.n ? ix_add(kb, emit(kb, &q), outer) : outer;
        return ix_add(kb, ix_mul(kb, outer, c), ix_divmod(kb, emit(kb, &r), c, true));
    }
    if (mod)
        return small ? emit(kb, &r) : raw_divmod(kb, emit(kb, &r), d, true);
    if (small)
        return emit(kb, &q);
    int rest = raw_divmod(kb, emit(kb, &r), d, false);
    return q.n ? ix_add(kb, emit(kb, &q), rest) : rest;
}

int ix_div(KB *kb, int a, Dim d) { return ix_divmod(kb, a, d, false); }
int ix_mod(KB *kb, int a, Dim d) { return ix_divmod(kb, a, d, true); }

int ix_clamp(KB *kb, int a, Dim size)
{
    if (a < 0 || kb->oom)
        return -1;
    Dim e = kb->extent[a];
    if (e.k >= 0 && dim_divides(e, size))
        return a; /* already in [0, size) */
    int last = dim_is_static(size) ? lx_int(kb, size.k - 1)
                                   : lx_binary(kb, OP_SUB, DT_I64, lx_dim(kb, size), lx_int(kb, 1));
    int lo = lx_binary(kb, OP_MINIMUM, DT_I64, a, last);
    int v = lx_binary(kb, OP_MAXIMUM, DT_I64, lo, lx_int(kb, 0));
    if (v >= 0)
        kb->extent[v] = size;
    return v;
}

int ix_linear(KB *kb, int n, const int *idx, const Dim *stride, Dim offset)
{
    Lin l = {.n = 0};
    for (int d = 0; d < n; d++) {
        if (idx[d] < 0 || kb->oom)
            return -1;
        collect(kb, idx[d], stride[d], &l);
    }
    add_term(&l, -1, offset);
    return l.full ? -1 : emit(kb, &l);
}

bool ix_affine(KB *kb, int a, int nvar, Dim *coef, Dim *offset)
{
    if (a < 0 || kb->oom)
        return false;
    Lin l = {.n = 0};
    collect(kb, a, dim_static(1), &l);
    fold_divmod(kb, &l);
    for (int v = 0; v < nvar; v++)
        coef[v] = dim_static(0);
    *offset = dim_static(0);
    bool have_offset = false;
    for (int i = 0; i < l.n; i++) {
        const Term *t = &l.t[i];
        if (t->atom < 0) {
            if (have_offset)
                return false; /* two symbolic constants: not one Dim */
            *offset = t->coef;
            have_offset = true;
            continue;
        }
        const Lx *x = &kb->lx[t->atom];
        if (x->kind != LX_VAR || x->i >= nvar || coef[x->i].k != 0)
            return false;
        coef[x->i] = t->coef;
    }
    return !l.full;
}
