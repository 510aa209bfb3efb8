//! Make a big recording from a real one, for `bench/recording_scale.sh`: the samples of
//! SRC repeated, each copy shifted past the previous one in time, cut at exactly N; written as version 2 (streamed, one copy at a time), or with `--v1` as the
//! gzip JSON of version 1 (to time the old format).
//!
//! `cargo run --release --example inflate_recording -- SRC DST N [--v1]`
//!
//! Prints one JSON line: samples, copies, frames, stacks, bytes.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use profmap::profile::{Recording, Samples, Waker, pmr, read_recording};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(src), Some(dst), Some(want)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: inflate_recording SRC DST N [--v1]");
        std::process::exit(2);
    };
    let v1 = args.iter().any(|a| a == "--v1");
    let want: usize = want.parse().unwrap_or_else(|_| fail("N is not a number"));
    let rec = read_recording(&PathBuf::from(src)).unwrap_or_else(|e| fail(&e.to_string()));
    let Some(s) = rec.sampled.as_ref().filter(|s| !s.samples.is_empty()) else {
        fail("SRC holds no samples")
    };
    let copies = want.div_ceil(s.samples.len()).max(1);
    let span = s
        .samples
        .iter()
        .map(|x| x.time_ns + x.weight_ns)
        .max()
        .unwrap_or(0)
        .max((s.wall_ms * 1e6) as u64)
        + 1;
    let head = scaled_tables(&rec, copies, want);
    let file = std::fs::File::create(dst).unwrap_or_else(|e| fail(&e.to_string()));
    let out = BufWriter::new(file);
    let shifted = |k: usize| {
        let left = want.saturating_sub(k * s.samples.len());
        let mut block: Samples = s.samples.iter_woken().take(left).collect();
        block.for_each_mut(|x| x.time_ns += k as u64 * span);
        block.map_wakers(|w| Waker {
            time_ns: w.time_ns + k as u64 * span,
            ..w
        });
        block
    };
    if v1 {
        let mut full = head;
        full.version = 1;
        if let Some(h) = full.sampled.as_mut() {
            h.samples = (0..copies)
                .flat_map(|k| shifted(k).iter_woken().collect::<Vec<_>>())
                .collect();
        }
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
        serde_json::to_writer(&mut gz, &full).unwrap_or_else(|e| fail(&e.to_string()));
        gz.finish()
            .and_then(|mut o| o.flush())
            .unwrap_or_else(|e| fail(&e.to_string()));
    } else {
        let mut w = pmr::Writer::new(out, &head).unwrap_or_else(|e| fail(&e.to_string()));
        for k in 0..copies {
            // Each copy's waits are the original's, indexed into the copy.
            let block = shifted(k);
            let n = block.len();
            w.samples(&block, s.waits.iter().filter(|x| (x.sample as usize) < n))
                .unwrap_or_else(|e| fail(&e.to_string()));
        }
        w.finish()
            .and_then(|mut o| o.flush())
            .unwrap_or_else(|e| fail(&e.to_string()));
    }
    let bytes = std::fs::metadata(dst).map_or(0, |m| m.len());
    println!(
        "{{\"samples\": {}, \"copies\": {copies}, \"frames\": {}, \"stacks\": {}, \"bytes\": {bytes}}}",
        want,
        s.frames.len(),
        s.stacks.len()
    );
}

/// The tables of `rec` for `want` samples (`copies` copies, the last one cut): counts
/// and wall times scaled, the waits side table repeated with its sample indices shifted.
fn scaled_tables(rec: &Recording, copies: usize, want: usize) -> Recording {
    let mut head = rec.clone();
    let c = copies as u64;
    if let Some(h) = head.sampled.as_mut() {
        let n = h.samples.len() as u32;
        let waits = std::mem::take(&mut h.waits);
        let waits = &waits;
        h.waits = (0..copies as u32)
            .flat_map(|k| {
                waits.iter().map(move |mut w| {
                    w.sample += k * n;
                    w
                })
            })
            .filter(|w| (w.sample as usize) < want)
            .collect();
        h.samples = Samples::default();
        h.wall_ms *= copies as f64;
        let q = &mut h.quality;
        for v in [
            &mut q.samples,
            &mut q.off_cpu_intervals,
            &mut q.lost_samples,
            &mut q.unwind_failures,
            &mut q.truncated_stacks,
        ] {
            *v *= c;
        }
    }
    if let Some(r) = head.profiled_run.as_mut() {
        r.wall_ms *= copies as f64;
        r.user_ms *= copies as f64;
        r.sys_ms *= copies as f64;
    }
    head
}

fn fail(why: &str) -> ! {
    eprintln!("inflate_recording: {why}");
    std::process::exit(2);
}
