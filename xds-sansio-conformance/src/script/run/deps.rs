//! The client's dependency manager in a scenario: `deps` commands, the manager taking the
//! client's events and giving it subscriptions, and `expect deps` lines.
//!
//! Decisions:
//! - The first `deps` step creates the manager (`option: deps-grace=` sets its grace);
//!   from then on every client event goes to it as the runner takes it, and its commands
//!   go to the client at once, so their requests are the next `C->S` lines.
//! - Snapshots are consumed in order by `expect deps snapshot`; `no-snapshot` looks at
//!   the ones not consumed.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::Runner;
use crate::script::ast::{DepsCommand, DepsExpectation, Outcome};
use xds_sansio::client::deps::{DependencyManager, DepsConfig, Failure, ResourceKey};
use xds_sansio::types::TypeInfo;

fn key_text(key: &ResourceKey) -> String {
    let short = TypeInfo::of(key.type_url)
        .short_name()
        .unwrap_or(key.type_url);
    format!("{short}:{}", key.name)
}

fn failure_matches(failure: &Failure, text: &str) -> Result<(), String> {
    let shown = failure.to_string();
    if shown.contains(text) {
        Ok(())
    } else {
        Err(format!(
            "expected an error containing {text:?}, got {shown:?}"
        ))
    }
}

impl Runner<'_> {
    pub(super) fn deps_command(&mut self, command: &DepsCommand) -> Result<(), String> {
        if self.sim.client.is_none() {
            return Err("the model does not play the client".into());
        }
        let now = self.sim.now();
        let grace = self.deps_grace;
        let deps = self.deps.get_or_insert_with(|| {
            let mut config = DepsConfig::default();
            if let Some(grace) = grace {
                config.unsubscribe_grace = grace;
            }
            DependencyManager::new(config)
        });
        match command {
            DepsCommand::Watch(names) => {
                for name in names {
                    deps.watch_listener(now, name).map_err(|e| e.to_string())?;
                }
            }
            DepsCommand::Unwatch(names) => {
                for name in names {
                    deps.unwatch_listener(now, name)
                        .map_err(|e| e.to_string())?;
                }
            }
            DepsCommand::WatchAll => deps.watch_all(now),
        }
        self.pump_deps();
        Ok(())
    }

    /// Gives the manager's commands to the client and keeps its snapshots; whether any
    /// command was given.
    pub(super) fn pump_deps(&mut self) -> bool {
        let Some(deps) = self.deps.as_mut() else {
            return false;
        };
        let mut gave = false;
        while let Some(command) = deps.poll_command() {
            if let Some(client) = self.sim.client.as_mut() {
                // The manager only names well-formed names of types a client carries on
                // ADS; a per-type stream refuses other types, which is the scenario's
                // business (it then sees no request).
                let _ = command.apply_to(client);
                gave = true;
            }
        }
        while let Some(snapshot) = deps.poll_snapshot() {
            self.snapshots.push((snapshot, false));
        }
        gave
    }

    pub(super) fn expect_deps(&mut self, expectation: &DepsExpectation) -> Result<(), String> {
        let deps = self
            .deps
            .as_ref()
            .ok_or("no dependency manager: a deps step creates it")?;
        match expectation {
            DepsExpectation::Snapshot => {
                let next = self.snapshots.iter_mut().find(|(_, consumed)| !consumed);
                match next {
                    Some((_, consumed)) => {
                        *consumed = true;
                        Ok(())
                    }
                    None => Err(format!(
                        "no snapshot; waiting for {}",
                        deps.waiting()
                            .iter()
                            .map(|(k, _)| key_text(k))
                            .collect::<Vec<_>>()
                            .join(",")
                    )),
                }
            }
            DepsExpectation::NoSnapshot => {
                let left = self.snapshots.iter().filter(|(_, c)| !c).count();
                if left == 0 {
                    Ok(())
                } else {
                    Err(format!("{left} snapshot(s) not consumed"))
                }
            }
            DepsExpectation::Waiting(expected) => {
                let mut got: Vec<String> =
                    deps.waiting().iter().map(|(k, _)| key_text(k)).collect();
                got.sort();
                let mut want: Vec<String> = expected
                    .iter()
                    .map(|(t, n)| {
                        let short = TypeInfo::of(t).short_name().unwrap_or(t);
                        format!("{short}:{n}")
                    })
                    .collect();
                want.sort();
                if got == want {
                    Ok(())
                } else {
                    Err(format!("waiting for {{{}}}", got.join(",")))
                }
            }
            DepsExpectation::Listener(name, outcome) => {
                let config = deps
                    .config(name)
                    .ok_or_else(|| format!("the manager knows no listener {name}"))?;
                match (outcome, &config.status) {
                    (Outcome::Ok(_), Ok(())) => Ok(()),
                    (Outcome::Ok(_), Err(failure)) => Err(format!("listener fails: {failure}")),
                    (Outcome::Error(text), Err(failure)) => failure_matches(failure, text),
                    (Outcome::Error(_), Ok(())) => Err("the listener is usable".into()),
                }
            }
            DepsExpectation::Cluster(listener, cluster, outcome) => {
                let config = deps
                    .config(listener)
                    .ok_or_else(|| format!("the manager knows no listener {listener}"))?;
                let found = config
                    .clusters
                    .iter()
                    .find(|c| c.name == *cluster)
                    .ok_or_else(|| {
                        format!("listener {listener} does not reach cluster {cluster}")
                    })?;
                match (outcome, &found.leaves) {
                    (Outcome::Ok(want), Ok(leaves)) if want == leaves => Ok(()),
                    (Outcome::Ok(_), Ok(leaves)) => Err(format!("leaves {{{}}}", leaves.join(","))),
                    (Outcome::Ok(_), Err(failure)) => Err(format!("cluster fails: {failure}")),
                    (Outcome::Error(text), Err(failure)) => failure_matches(failure, text),
                    (Outcome::Error(_), Ok(leaves)) => {
                        Err(format!("the cluster is usable: {{{}}}", leaves.join(",")))
                    }
                }
            }
        }
    }
}
