//! Symbols: the scenario's names for the values the model chooses (versions, nonces).
//!
//! Decisions:
//! - A symbol seen for the first time binds to the value the model produced, and must match
//!   it from then on; a value bound to one symbol cannot be bound to another, so `N=A` and
//!   `N=B` are different nonces.
//! - A symbol the scenario side writes before the model produced it stands for itself.
//! - Trying a match against several candidates (events) binds tentatively: `checkpoint`
//!   before a try, `rollback` after a miss undoes what the try bound.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Symbols bound to values, in one namespace (the versions of one type, or the nonces of
/// one stream).
#[derive(Default)]
pub(super) struct Symbols {
    forward: BTreeMap<String, String>,
    backward: BTreeMap<String, String>,
    /// The symbols bound since the last checkpoint.
    journal: Vec<String>,
}

impl Symbols {
    fn bind(&mut self, symbol: &str, value: &str) {
        self.forward.insert(symbol.into(), value.into());
        self.backward.insert(value.into(), symbol.into());
        self.journal.push(symbol.into());
    }

    /// From here, [`Symbols::rollback`] undoes the bindings made.
    pub(super) fn checkpoint(&mut self) {
        self.journal.clear();
    }

    /// Undoes every binding made since the last checkpoint.
    pub(super) fn rollback(&mut self) {
        for symbol in self.journal.drain(..) {
            if let Some(value) = self.forward.remove(&symbol) {
                self.backward.remove(&value);
            }
        }
    }

    /// The value of a symbol written by the scenario side: its binding, or itself.
    pub(super) fn input(&mut self, symbol: &str) -> String {
        if let Some(value) = self.forward.get(symbol) {
            return value.clone();
        }
        if !symbol.is_empty() && !self.backward.contains_key(symbol) {
            self.bind(symbol, symbol);
        }
        symbol.into()
    }

    /// Checks a value the model produced against a symbol, binding it the first time.
    pub(super) fn check(&mut self, what: &str, symbol: &str, value: &str) -> Result<(), String> {
        if symbol.is_empty() || value.is_empty() {
            return if symbol == value {
                Ok(())
            } else {
                Err(format!("{what}: expected {symbol:?}, got {value:?}"))
            };
        }
        match (self.forward.get(symbol), self.backward.get(value)) {
            (Some(bound), _) if bound == value => Ok(()),
            (Some(bound), _) => Err(format!("{what}: {symbol} is {bound:?}, got {value:?}")),
            (None, Some(other)) => Err(format!(
                "{what}: {value:?} is already {other}, not {symbol}"
            )),
            (None, None) => {
                self.bind(symbol, value);
                Ok(())
            }
        }
    }

    /// The symbol a value is bound to.
    fn symbol_of(&self, value: &str) -> Option<&String> {
        self.backward.get(value)
    }
}

/// Replaces the values after `V=`, `N=` and `@` by the symbols they are bound to, so
/// diagrams read like the protocol text's (`V=X`, not a digest).
pub(super) fn symbolize(text: &str, versions: Option<&Symbols>, nonces: &Symbols) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['=', '@']) {
        let (head, tail) = rest.split_at(at + 1);
        out.push_str(head);
        let end = tail
            .find([',', ')', '}', ']', '[', ':'])
            .unwrap_or(tail.len());
        let (value, after) = tail.split_at(end);
        let symbol = if head.ends_with("N=") {
            nonces.symbol_of(value)
        } else if head.ends_with("V=") || head.ends_with('@') {
            versions.and_then(|v| v.symbol_of(value))
        } else {
            None
        };
        out.push_str(symbol.map_or(value, String::as_str));
        rest = after;
    }
    out.push_str(rest);
    out
}
