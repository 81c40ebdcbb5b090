//! Strategy registries: each operator's one table from strategy name to engine, documentation and capabilities.
//!
//! Every operator declares its strategies once with `strategies!`: the macro writes the strategy enum and the
//! table from the same rows, so parsing a name, the error listing valid names, `name()`, the capability checks,
//! the bindings' `strategies()` listing, the CLI's `--strategy` choices and the README's lists all come from one
//! place. Adding a strategy is one row plus its engine module.

use crate::error::{Error, Result};

/// What a strategy is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An engine for real use (what `auto` picks from, or a supported alternative).
    Production,
    /// The plain engine written from the definition: the tests' oracle.
    Reference,
    /// Kept to reproduce a paper's comparison; `auto` never picks it.
    Baseline,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Production => "production",
            Role::Reference => "reference",
            Role::Baseline => "baseline",
        }
    }
}

/// What a strategy can do, as the operator's checks and the documentation need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub role: Role,
    /// Runs on worker threads (`threads=` matters).
    pub parallel: bool,
    /// Honours the pane farm's options (`scheduler`, `window_scheduler`, `split_threshold`, the PID's).
    pub farm_options: bool,
    /// Merges several time-sorted sources itself, a thread per source: `lateness` must be `None`.
    pub sorted_sources: bool,
}

impl Capabilities {
    /// On the caller's thread, no farm options, any sources.
    pub const SERIAL: Self = Self {
        role: Role::Production,
        parallel: false,
        farm_options: false,
        sorted_sources: false,
    };

    /// On worker threads.
    pub const PARALLEL: Self = Self {
        parallel: true,
        ..Self::SERIAL
    };

    pub const fn role(self, role: Role) -> Self {
        Self { role, ..self }
    }

    pub const fn farm_options(self) -> Self {
        Self {
            farm_options: true,
            ..self
        }
    }

    pub const fn sorted_sources(self) -> Self {
        Self {
            sorted_sources: true,
            ..self
        }
    }
}

/// A strategy as users see it: its name, one line of documentation and its capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategyDoc {
    pub name: &'static str,
    pub doc: &'static str,
    pub caps: Capabilities,
}

/// One row of a registry: the strategy, how its engine is built (`E`, the operator's own constructor type),
/// and what users see.
pub(crate) struct Entry<S: 'static, E: 'static> {
    pub(crate) strategy: S,
    pub(crate) engine: E,
    pub(crate) about: StrategyDoc,
}

/// The row of `strategy` (every variant has one: the macro writes both).
pub(crate) fn entry<S: PartialEq, E>(
    table: &'static [Entry<S, E>],
    strategy: S,
) -> &'static Entry<S, E> {
    table
        .iter()
        .find(|e| e.strategy == strategy)
        .expect("every strategy has a registry row")
}

/// How an operator words an unknown strategy name (each keeps the wording its users and tests know).
pub(crate) type Unknown = fn(&str, &[&str]) -> String;

/// `unknown strategy "x"; expected one of [...]` (window aggregation, preference queries).
pub(crate) fn unknown_strategy(name: &str, names: &[&str]) -> String {
    format!("unknown strategy {name:?}; expected one of {names:?}")
}

/// `expected one of [...], got "x"` (the band join).
pub(crate) fn expected_one_of(name: &str, names: &[&str]) -> String {
    format!("expected one of {names:?}, got {name:?}")
}

/// Parses a strategy name against a registry; the error lists the valid names.
pub(crate) fn parse<S: Copy, E>(
    table: &'static [Entry<S, E>],
    name: &str,
    unknown: Unknown,
) -> Result<S> {
    match table.iter().find(|e| e.about.name == name) {
        Some(e) => Ok(e.strategy),
        None => {
            let names: Vec<&str> = table.iter().map(|e| e.about.name).collect();
            Err(Error::param("strategy", unknown(name, &names)))
        }
    }
}

/// Declares an operator's strategy enum and its registry from the same rows:
///
/// ```text
/// strategies! {
///     /// Which engine runs the join.
///     pub enum JoinStrategy in JOIN_STRATEGIES: Build, unknown = expected_one_of {
///         /// `scalejoin` with more than one thread, else `serial`.
///         Auto = "auto", engine::auto, Capabilities::PARALLEL;
///         ...
///     }
/// }
/// ```
///
/// Each row's doc comment is both the variant's rustdoc and the one-line documentation users see. The enum
/// gets `name()`, `parse()` (its error worded by the `unknown` function), `about()`, `is_parallel()`, `all()`
/// and `those()`.
macro_rules! strategies {
    (
        $(#[$enum_meta:meta])*
        pub enum $Enum:ident in $TABLE:ident: $Engine:ty, unknown = $unknown:path {
            $(
                #[doc = $doc:literal]
                $Variant:ident = $name:literal, $engine:expr, $caps:expr;
            )+
        }
    ) => {
        $(#[$enum_meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $Enum {
            $(#[doc = $doc] $Variant,)+
        }

        pub(crate) static $TABLE: &[$crate::registry::Entry<$Enum, $Engine>] = &[
            $($crate::registry::Entry {
                strategy: $Enum::$Variant,
                engine: $engine,
                about: $crate::registry::StrategyDoc {
                    name: $name,
                    doc: $doc.trim_ascii(),
                    caps: $caps,
                },
            },)+
        ];

        /// Written by name (a checkpoint's parameters), read back through [`Self::parse`].
        impl serde::Serialize for $Enum {
            fn serialize<S: serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $Enum {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let name = <String as serde::Deserialize>::deserialize(d)?;
                Self::parse(&name).map_err(serde::de::Error::custom)
            }
        }

        impl $Enum {
            /// Parses a strategy name; the error lists the valid names.
            pub fn parse(name: &str) -> $crate::error::Result<Self> {
                $crate::registry::parse($TABLE, name, $unknown)
            }

            pub fn name(self) -> &'static str {
                self.about().name
            }

            /// The strategy's name, documentation and capabilities.
            pub fn about(self) -> &'static $crate::registry::StrategyDoc {
                &self.entry().about
            }

            /// Runs on worker threads.
            pub fn is_parallel(self) -> bool {
                self.about().caps.parallel
            }

            /// Every strategy, in the registry's order.
            pub fn all() -> impl Iterator<Item = &'static $crate::registry::StrategyDoc> {
                $TABLE.iter().map(|e| &e.about)
            }

            /// Every strategy whose capabilities pass `keep`, in the registry's order: what a test iterates
            /// over, so that a strategy added to the table is tested without another edit.
            pub fn those(keep: impl Fn(&$crate::registry::Capabilities) -> bool) -> Vec<Self> {
                $TABLE.iter().filter(|e| keep(&e.about.caps)).map(|e| e.strategy).collect()
            }

            #[allow(dead_code)] // an operator whose engines take no constructor reads only `about`
            pub(crate) fn entry(self) -> &'static $crate::registry::Entry<$Enum, $Engine> {
                $crate::registry::entry($TABLE, self)
            }
        }
    };
}

pub(crate) use strategies;
