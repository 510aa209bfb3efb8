//! A small program with a known time split, for trying profmap:
//! about 50% computing (`compute`), 30% sleeping (`wait_for_timer`), and 20% writing and
//! fsyncing a file (`save_results`), in a loop of 10 rounds.
//!
//! `cargo build --release --examples && ./target/release/profmap run -- ./target/release/examples/demo`

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

#[inline(never)]
fn compute(ms: u64) -> u64 {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut x = 0u64;
    while Instant::now() < end {
        for i in 0..10_000u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

#[inline(never)]
fn wait_for_timer(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

#[inline(never)]
fn save_results(path: &std::path::Path, rounds: usize) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    let block = vec![b'x'; 64 * 1024];
    for _ in 0..rounds {
        f.write_all(&block)?;
        f.sync_data()?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let path = std::env::temp_dir().join(format!("profmap-demo-{}.dat", std::process::id()));
    let mut acc = 0;
    for _ in 0..10 {
        acc ^= compute(25);
        wait_for_timer(15);
        save_results(&path, 16)?;
    }
    std::fs::remove_file(&path)?;
    println!("demo done ({acc:x})");
    Ok(())
}
