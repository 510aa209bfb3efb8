//! Getting a target running: launching a command suspended (so samplers attach before
//! its first instruction), finding every process of its tree, and stopping that tree.

pub mod launch;
pub mod tree;

pub use launch::{Launched, Suspended, become_subreaper, resolve_program, spawn_suspended};
