//! The tmpfiles.d lines root writes (`idle --apply`, `--revert`): any comments, paths and
//! values through `idle::tmpfiles::Lines`. Property: the text, read line by line as
//! systemd-tmpfiles reads it, is exactly the comments and `w` lines taken, each `w` line
//! for the path and value given (`idle::tmpfiles::holds_only_what_was_taken`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wattson::idle::tmpfiles::{Op, holds_only_what_was_taken};

fuzz_target!(|ops: Vec<(bool, String, String)>| {
    let ops: Vec<Op> = ops
        .into_iter()
        .map(|(comment, a, b)| if comment { Op::Comment(a) } else { Op::Write(a, b) })
        .collect();
    if let Err(e) = holds_only_what_was_taken(&ops) {
        panic!("{e}");
    }
});
