//! Round trips, cut-off files and damaged chunks of the version-2 format.

use super::*;
use crate::profile::{
    Frame, FrameKind, Recording, SampleKind, SampledProfile, SessionMeta, StackNode, ThreadSample,
    WaitOn, WaitState,
};

fn recording(n: usize) -> Recording {
    let mut rec = Recording::new(SessionMeta {
        run_id: "r".into(),
        command: vec!["x".into()],
        started_unix_s: 1.0,
        tool_version: "0".into(),
        hostname: None,
        kernel: None,
        cpus: Some(2),
    });
    let frame = Frame {
        function: "f".into(),
        module: None,
        file: None,
        line: None,
        kind: FrameKind::User,
        inlined: false,
    };
    let samples: Vec<_> = (0..n)
        .map(|i| ThreadSample {
            pid: 7,
            tid: 7 + (i % 3) as i32,
            time_ns: i as u64 * 1000,
            stack: Some(0).into(),
            weight_ns: 1000,
            kind: if i % 10 == 0 {
                SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                }
            } else {
                SampleKind::OnCpu
            },
        })
        .collect();
    rec.sampled = Some(SampledProfile {
        frequency_hz: 1000.0,
        frames: vec![frame],
        stacks: vec![StackNode {
            parent: None,
            frame: 0,
        }],
        waits: vec![WaitOn {
            sample: (n - 10) as u32,
            fd: Some(3),
            arg0: 3,
            resource: None,
        }],
        samples: samples.into(),
        ..SampledProfile::default()
    });
    rec
}

fn bytes(rec: &Recording) -> Vec<u8> {
    write(rec, Vec::new()).expect("write")
}

fn quality_warnings(rec: &Recording) -> &[String] {
    &rec.sampled.as_ref().expect("sampled").quality.warnings
}

#[test]
fn a_recording_round_trips_across_several_blocks() {
    let rec = recording(columns::BLOCK_SAMPLES * 2 + 17);
    let back = read(&bytes(&rec)[..]).expect("read");
    assert_eq!(back, rec);
}

#[test]
fn a_file_cut_off_keeps_its_complete_blocks_and_says_so() {
    let rec = recording(columns::BLOCK_SAMPLES * 2 + 17);
    let full = bytes(&rec);
    // Cut inside the third block: the first two are kept.
    let cut = &full[..full.len() - 40];
    let back = read(cut).expect("read");
    let s = back.sampled.as_ref().expect("sampled");
    assert_eq!(s.samples.len(), columns::BLOCK_SAMPLES * 2);
    assert_eq!(
        s.samples[..],
        rec.sampled.as_ref().expect("s").samples[..s.samples.len()]
    );
    let w = quality_warnings(&back).join(" ");
    assert!(
        w.contains("incomplete") && w.contains("131072 samples"),
        "{w}"
    );
    // The wait named a sample of the lost tail: dropped with it.
    assert!(s.waits.is_empty());
}

#[test]
fn every_cut_reads_or_is_refused_without_panicking() {
    let rec = recording(300);
    let full = bytes(&rec);
    for cut in 0..full.len() {
        match read(&full[..cut]) {
            Ok(back) => assert!(!quality_warnings(&back).is_empty(), "cut at {cut}"),
            Err(why) => assert!(!why.is_empty()),
        }
    }
    assert!(quality_warnings(&read(&full[..]).expect("whole")).is_empty());
}

#[test]
fn a_damaged_block_fails_its_checksum_and_stops_the_read_there() {
    let rec = recording(columns::BLOCK_SAMPLES + 5);
    let mut b = bytes(&rec);
    let last = b.len() - 30;
    b[last] ^= 0x55;
    let back = read(&b[..]).expect("read");
    let w = quality_warnings(&back).join(" ");
    assert!(w.contains("checksum") || w.contains("end marker"), "{w}");
}

#[test]
fn damaged_tables_or_header_are_refused() {
    let rec = recording(10);
    let mut b = bytes(&rec);
    b[12 + CHUNK_HEADER + 2] ^= 0xff;
    assert!(read(&b[..]).expect_err("bad META").contains("tables"));
    let mut v = bytes(&rec);
    v[8] = 9;
    assert!(read(&v[..]).expect_err("version").contains("version 9"));
}

#[test]
fn a_chunk_claiming_more_than_its_cap_allocates_nothing() {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&TAG_META);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    assert!(read(&b[..]).expect_err("cap").contains("claims"));
}
