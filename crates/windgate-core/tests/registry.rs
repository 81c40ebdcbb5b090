//! The strategy registries: every row's name parses back to its strategy, names are unique, `auto` comes
//! first, and an unknown name's error lists every valid one.

use windgate_core::aggregate::Strategy;
use windgate_core::join::JoinStrategy;
use windgate_core::preference::PreferenceStrategy;
use windgate_core::registry::StrategyDoc;

/// Every row's name parses back to its strategy, names are unique and `auto` comes first.
#[test]
fn names_round_trip() {
    fn check<S: Copy + PartialEq + std::fmt::Debug>(
        all: Vec<&'static StrategyDoc>,
        parse: fn(&str) -> windgate_core::Result<S>,
        name: fn(S) -> &'static str,
    ) {
        assert_eq!(all[0].name, "auto");
        for (i, d) in all.iter().enumerate() {
            assert!(
                all[..i].iter().all(|e| e.name != d.name),
                "{} twice",
                d.name
            );
            assert!(!d.doc.is_empty() && !d.doc.starts_with(' '));
            assert_eq!(name(parse(d.name).unwrap()), d.name);
        }
        let err = parse("nope").unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");
        assert!(all.iter().all(|d| err.contains(&format!("{:?}", d.name))));
    }
    check(Strategy::all().collect(), Strategy::parse, Strategy::name);
    check(
        JoinStrategy::all().collect(),
        JoinStrategy::parse,
        JoinStrategy::name,
    );
    check(
        PreferenceStrategy::all().collect(),
        PreferenceStrategy::parse,
        PreferenceStrategy::name,
    );
}
