//! The server's side of a scenario as a story in time, for a test control plane that
//! plays it to a real client (`xds-sansio serve SCENARIO`): each server line's store
//! operations, at the scenario time it runs.
//!
//! Decisions:
//! - **Only `wait` moves time.** A real client answers when it answers, so a server line
//!   runs at the sum of the waits before it, not after the messages the scenario expects
//!   before it; those are the checker's to judge in the recording.
//! - **The bodies are the replay's**: the same item gives the same bytes as in `replay`
//!   (with references when the scenario runs the dependency manager, or says `[ref=..]`).
//! - **Versions** are the scenario's symbols as written, as a scenario's server side gives
//!   them to the store.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{ResourceEntry, StoreOp};

use super::build::body_of;
use crate::script::ast::{Action, Item, Scenario, ServerCommand};

/// An error a server line publishes for a name, or clears.
#[derive(Clone, Debug, PartialEq)]
pub enum ErrorOp {
    /// `server error TYPE NAME CODE ["message"]`
    /// ([`ResourceStore::set_error`](xds_sansio::server::ResourceStore::set_error)).
    Set {
        /// The type URL.
        type_url: String,
        /// The name, or `*`.
        name: String,
        /// The error.
        status: Status,
    },
    /// `server clear-error TYPE NAME`.
    Clear {
        /// The type URL.
        type_url: String,
        /// The name, or `*`.
        name: String,
    },
}

/// One server line of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStep {
    /// Its line in the scenario (from 1).
    pub line: usize,
    /// When it runs: the sum of the waits before it.
    pub at: Duration,
    /// Its store operations, applied as one revision.
    pub ops: Vec<StoreOp>,
    /// Its errors, applied after `ops`.
    pub errors: Vec<ErrorOp>,
}

/// The server lines of `scenario`, in order, each with its time.
pub fn server_timeline(scenario: &Scenario) -> Vec<ServerStep> {
    let refs_bodies = scenario
        .steps
        .iter()
        .any(|s| matches!(s.action, Action::Deps(_)));
    let mut at = Duration::ZERO;
    let mut steps = Vec::new();
    for step in &scenario.steps {
        match &step.action {
            Action::Wait(duration) => at += *duration,
            Action::ServerBatch(commands) => steps.push(ServerStep {
                line: step.line,
                at,
                ops: commands
                    .iter()
                    .flat_map(|c| ops_of(c, refs_bodies))
                    .collect(),
                errors: commands.iter().filter_map(error_of).collect(),
            }),
            _ => {}
        }
    }
    steps
}

fn entry_of(type_url: &str, item: &Item, refs_bodies: bool) -> ResourceEntry {
    let mut entry = ResourceEntry::new(item.name.clone(), body_of(item, type_url, "", refs_bodies));
    if let Some(version) = &item.version {
        entry = entry.with_version(version.clone());
    }
    if let Some(ttl) = item.ttl {
        entry = entry.with_ttl(ttl);
    }
    if !item.aliases.is_empty() {
        entry = entry.with_aliases(item.aliases.clone());
    }
    entry
}

fn ops_of(command: &ServerCommand, refs_bodies: bool) -> Vec<StoreOp> {
    match command {
        ServerCommand::Set(type_url, items) => items
            .iter()
            .map(|item| StoreOp::Set {
                type_url: type_url.clone(),
                entry: entry_of(type_url, item, refs_bodies),
            })
            .collect(),
        ServerCommand::Remove(type_url, names) => names
            .iter()
            .map(|name| StoreOp::Remove {
                type_url: type_url.clone(),
                name: name.clone(),
            })
            .collect(),
        ServerCommand::Publish(type_url) => alloc::vec![StoreOp::ServeType {
            type_url: type_url.clone(),
        }],
        ServerCommand::Error { .. } | ServerCommand::ClearError(..) => Vec::new(),
    }
}

/// The error a server command publishes or clears, if it is one.
pub(super) fn error_of(command: &ServerCommand) -> Option<ErrorOp> {
    match command {
        ServerCommand::Error {
            type_url,
            name,
            code,
            message,
        } => Some(ErrorOp::Set {
            type_url: type_url.clone(),
            name: name.clone(),
            status: Status {
                code: *code,
                message: message.clone(),
                details: Vec::new(),
            },
        }),
        ServerCommand::ClearError(type_url, name) => Some(ErrorOp::Clear {
            type_url: type_url.clone(),
            name: name.clone(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::parse;

    #[test]
    fn server_lines_run_at_the_sum_of_the_waits_before_them() {
        let scenario = parse(
            "model: server\nvariant: sotw\ntransport: ads\n\
             server set CDS a@1:x ; set EDS a@1:y\n\
             C->S (T=CDS,N=)\n\
             wait 5s\n\
             server remove CDS a\n\
             wait 2s\n\
             server error CDS b 5 \"gone\"\n",
            "t",
        )
        .unwrap();
        let timeline = server_timeline(&scenario);
        let times: Vec<(usize, u64, usize, usize)> = timeline
            .iter()
            .map(|s| (s.line, s.at.as_secs(), s.ops.len(), s.errors.len()))
            .collect();
        assert_eq!(times, [(4, 0, 2, 0), (7, 5, 1, 0), (9, 7, 0, 1)]);
        // The bodies are the replay's, the versions the scenario's symbols.
        let StoreOp::Set { entry, .. } = &timeline[0].ops[0] else {
            panic!("{:?}", timeline[0].ops[0]);
        };
        assert_eq!(entry.name, "a");
        assert_eq!(entry.version.as_deref(), Some("1"));
        assert_eq!(entry.body, crate::transcript::notation::body("a", "x"));
    }
}
