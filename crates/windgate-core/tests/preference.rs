//! Preference kernels against brute force over all pairs (the definitions of Mencagli et al., *Parallel Continuous
//! Preference Queries over Out-of-Order and Bursty Data Streams*), on small integer-valued data so that ties,
//! duplicates and `-0.0 == 0.0` are frequent, with Min and Max preferences mixed.
//!
//! The oracles here are written from the definitions independently of `preference::dominance`.

use proptest::prelude::*;
use windgate_core::preference::{
    Prefer, Skyline, TopDominant, TopK, dominates, k_dominance, skyline_reference,
    top_dominant_reference, topk_reference,
};

/// Columns, preferences, a permutation as total order, and a random A/B split of the rows.
#[derive(Debug, Clone)]
struct Case {
    prefer: Vec<Prefer>,
    cols: Vec<Vec<f64>>,
    order: Vec<u128>,
    in_a: Vec<bool>,
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![8 => (0i32..4).prop_map(f64::from), 1 => Just(-0.0), 1 => -1e300..1e300f64]
}

fn case(max_dims: usize) -> impl Strategy<Value = Case> {
    (1..=max_dims, 0usize..48).prop_flat_map(|(d, n)| {
        let prefer = prop::collection::vec(prop_oneof![Just(Prefer::Min), Just(Prefer::Max)], d);
        let cols = prop::collection::vec(prop::collection::vec(value(), n), d);
        let order = Just((0..n as u128).map(|i| i * 3 + 1).collect::<Vec<_>>()).prop_shuffle();
        let in_a = prop::collection::vec(any::<bool>(), n);
        (prefer, cols, order, in_a).prop_map(|(prefer, cols, order, in_a)| Case {
            prefer,
            cols,
            order,
            in_a,
        })
    })
}

impl Case {
    fn n(&self) -> usize {
        self.order.len()
    }

    fn row(&self, i: usize) -> Vec<f64> {
        self.cols.iter().map(|c| c[i]).collect()
    }

    /// The columns and orders of the rows where `keep` holds.
    fn part(&self, keep: impl Fn(usize) -> bool) -> (Vec<Vec<f64>>, Vec<u128>) {
        let rows: Vec<usize> = (0..self.n()).filter(|&i| keep(i)).collect();
        let cols = self
            .cols
            .iter()
            .map(|c| rows.iter().map(|&i| c[i]).collect())
            .collect();
        (cols, rows.iter().map(|&i| self.order[i]).collect())
    }
}

/// `a` at least as good as `b` in dimension `k` / strictly better, straight from the preference.
fn le(p: Prefer, a: f64, b: f64) -> bool {
    match p {
        Prefer::Min => a <= b,
        Prefer::Max => a >= b,
    }
}

fn lt(p: Prefer, a: f64, b: f64) -> bool {
    match p {
        Prefer::Min => a < b,
        Prefer::Max => a > b,
    }
}

fn oracle_dominates(prefer: &[Prefer], a: &[f64], b: &[f64]) -> bool {
    let all_le = (0..prefer.len()).all(|k| le(prefer[k], a[k], b[k]));
    let some_lt = (0..prefer.len()).any(|k| lt(prefer[k], a[k], b[k]));
    all_le && some_lt
}

/// The largest k such that some set of k dimensions has `a ≤ b` in all and `a < b` in one (0 if none), by
/// enumerating every subset of dimensions.
fn oracle_k(prefer: &[Prefer], a: &[f64], b: &[f64]) -> usize {
    let d = prefer.len();
    (0u32..1 << d)
        .filter(|&s| {
            let dims: Vec<usize> = (0..d).filter(|&k| s >> k & 1 == 1).collect();
            dims.iter().all(|&k| le(prefer[k], a[k], b[k]))
                && dims.iter().any(|&k| lt(prefer[k], a[k], b[k]))
        })
        .map(|s| s.count_ones() as usize)
        .max()
        .unwrap_or(0)
}

/// `(order, κ)` of every skyline point of the case, ascending by order, from the oracles.
fn oracle_kappas(c: &Case) -> Vec<(u128, u32)> {
    let d = c.prefer.len();
    let mut out: Vec<(u128, u32)> = (0..c.n())
        .filter_map(|t| {
            let kappa = (0..c.n())
                .filter(|&s| s != t)
                .map(|s| oracle_k(&c.prefer, &c.row(s), &c.row(t)))
                .max()
                .unwrap_or(0);
            let dominated = (0..c.n()).any(|s| oracle_dominates(&c.prefer, &c.row(s), &c.row(t)));
            assert_eq!(dominated, kappa == d, "κ = d iff Pareto-dominated");
            (!dominated).then_some((c.order[t], kappa as u32))
        })
        .collect();
    out.sort_unstable();
    out
}

fn oracle_select(mut sky: Vec<(u128, u32)>, delta: usize) -> Vec<(u128, u32)> {
    sky.sort_by_key(|&(o, k)| (k, o));
    sky.truncate(delta);
    sky.sort_unstable();
    sky
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn dominance_and_k_dominance_match_definitions(c in case(5)) {
        for a in 0..c.n().min(12) {
            for b in 0..c.n().min(12) {
                let (ra, rb) = (c.row(a), c.row(b));
                prop_assert_eq!(dominates(&c.prefer, &ra, &rb), oracle_dominates(&c.prefer, &ra, &rb));
                prop_assert_eq!(k_dominance(&c.prefer, &ra, &rb), oracle_k(&c.prefer, &ra, &rb));
            }
        }
    }

    #[test]
    fn skyline_matches_brute_force(c in case(4)) {
        let want: Vec<u128> = oracle_kappas(&c).into_iter().map(|(o, _)| o).collect();
        prop_assert_eq!(&skyline_reference(&c.prefer, &c.cols, &c.order), &want);
        let s = Skyline::build(c.prefer.clone(), &c.cols, &c.order);
        prop_assert_eq!(&s.members(), &want);
        // Insertion order does not matter.
        let mut r = Skyline::new(c.prefer.clone());
        for i in (0..c.n()).rev() {
            r.insert(&c.row(i), c.order[i]);
        }
        prop_assert_eq!(&r.members(), &want);
    }

    #[test]
    fn skyline_merge_equals_skyline_of_union(c in case(4)) {
        let (ca, oa) = c.part(|i| c.in_a[i]);
        let (cb, ob) = c.part(|i| !c.in_a[i]);
        let a = Skyline::build(c.prefer.clone(), &ca, &oa);
        let b = Skyline::build(c.prefer.clone(), &cb, &ob);
        let whole = Skyline::build(c.prefer.clone(), &c.cols, &c.order);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        prop_assert_eq!(ab.members(), whole.members());
        prop_assert_eq!(ba.rows(), whole.rows());
    }

    #[test]
    fn top_dominant_matches_brute_force(c in case(4), delta in 0usize..12) {
        let sky = oracle_kappas(&c);
        let t = TopDominant::build(c.prefer.clone(), &c.cols, &c.order);
        prop_assert_eq!(&t.skyline(), &sky);
        let want = oracle_select(sky, delta);
        prop_assert_eq!(&t.select(delta), &want);
        prop_assert_eq!(&top_dominant_reference(&c.prefer, &c.cols, &c.order, delta), &want);
    }

    #[test]
    fn top_dominant_merge_equals_union(c in case(4), delta in 0usize..12) {
        let (ca, oa) = c.part(|i| c.in_a[i]);
        let (cb, ob) = c.part(|i| !c.in_a[i]);
        let a = TopDominant::build(c.prefer.clone(), &ca, &oa);
        let b = TopDominant::build(c.prefer.clone(), &cb, &ob);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b;
        ba.merge(&a);
        let sky = oracle_kappas(&c);
        prop_assert_eq!(&ab.skyline(), &sky);
        prop_assert_eq!(&ba.skyline(), &sky);
        prop_assert_eq!(ab.select(delta), oracle_select(sky, delta));
    }

    #[test]
    fn topk_matches_brute_force_and_merges(c in case(1), k in 0usize..20, descending in any::<bool>()) {
        let score = &c.cols[0];
        let mut rows: Vec<(u128, f64)> = c.order.iter().copied().zip(score.iter().copied()).collect();
        rows.sort_by(|x, y| {
            let s = x.1.partial_cmp(&y.1).unwrap();
            (if descending { s.reverse() } else { s }).then(x.0.cmp(&y.0))
        });
        rows.truncate(k);
        let whole = TopK::build(k, descending, score, &c.order);
        prop_assert_eq!(&whole.ranked(), &rows);
        prop_assert_eq!(&topk_reference(k, descending, score, &c.order), &rows);

        let (ca, oa) = c.part(|i| c.in_a[i]);
        let (cb, ob) = c.part(|i| !c.in_a[i]);
        let mut a = TopK::build(k, descending, &ca[0], &oa);
        let b = TopK::build(k, descending, &cb[0], &ob);
        a.merge(&b);
        prop_assert_eq!(&a.ranked(), &rows);
    }

    /// H over three partitions folded into an empty window in two different orders, as the farm may.
    #[test]
    fn three_way_merges_do_not_depend_on_arrival_order(c in case(3), delta in 0usize..8, k in 0usize..8) {
        let parts: Vec<(Vec<Vec<f64>>, Vec<u128>)> = (0..3).map(|p| c.part(|i| i % 3 == p)).collect();
        let sky: Vec<Skyline> = parts.iter().map(|(cols, o)| Skyline::build(c.prefer.clone(), cols, o)).collect();
        let td: Vec<TopDominant> =
            parts.iter().map(|(cols, o)| TopDominant::build(c.prefer.clone(), cols, o)).collect();
        let tk: Vec<TopK> = parts.iter().map(|(cols, o)| TopK::build(k, true, &cols[0], o)).collect();
        for perm in [[0, 1, 2], [2, 0, 1]] {
            let mut s = Skyline::new(c.prefer.clone());
            let mut t = TopDominant::new(c.prefer.clone());
            let mut q = TopK::new(k, true);
            for p in perm {
                s.merge(&sky[p]);
                t.merge(&td[p]);
                q.merge(&tk[p]);
            }
            prop_assert_eq!(s.members(), skyline_reference(&c.prefer, &c.cols, &c.order));
            prop_assert_eq!(t.select(delta), top_dominant_reference(&c.prefer, &c.cols, &c.order, delta));
            prop_assert_eq!(q.ranked(), topk_reference(k, true, &c.cols[0], &c.order));
        }
    }
}
