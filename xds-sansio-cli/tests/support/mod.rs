//! Shared by the tests that run the tool as a long-lived child process (`tap`, `serve`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// Spawns `command` with its stdout piped, and a receiver of its output lines as they
/// come (read on a thread of their own).
pub fn spawn_with_lines(command: &mut Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, lines)
}
