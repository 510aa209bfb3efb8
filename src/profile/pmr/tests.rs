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
        // Every third off-CPU sample blocked in a call, and the last one.
        waits: (0..n)
            .filter(|i| i % 30 == 0 || *i == n - 10)
            .map(|i| WaitOn {
                sample: i as u32,
                fd: Some(3 + (i % 7) as i32),
                arg0: 3,
                resource: (i % 60 == 0).then_some(0).into(),
            })
            .collect(),
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
    // Cut inside the third block: the first two are kept, with their waits.
    let (third, _) = chunks(&full)
        .into_iter()
        .filter(|(_, tag)| *tag == TAG_SAMPLES)
        .nth(2)
        .expect("a third block");
    let cut = &full[..third + 40];
    let back = read(cut).expect("read");
    let s = back.sampled.as_ref().expect("sampled");
    assert_eq!(s.samples.len(), columns::BLOCK_SAMPLES * 2);
    let whole = &rec.sampled.as_ref().expect("s").samples;
    assert!(s.samples.iter().eq(whole.iter().take(s.samples.len())));
    let w = quality_warnings(&back).join(" ");
    assert!(
        w.contains("incomplete") && w.contains("131072 samples"),
        "{w}"
    );
    // The waits of the lost tail are dropped with it.
    let kept = s.samples.len() as u32;
    let before: Vec<_> = (rec.sampled.as_ref().expect("s").waits.iter())
        .filter(|w| w.sample < kept)
        .collect();
    assert_eq!(s.waits.to_vec(), before);
    assert!(!s.waits.is_empty());
}

/// Where each chunk of a recording starts, and its tag.
fn chunks(b: &[u8]) -> Vec<(usize, [u8; 4])> {
    let mut at = MAGIC.len() + 4;
    let mut out = Vec::new();
    while at + CHUNK_HEADER <= b.len() {
        let tag = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        let stored = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]);
        out.push((at, tag));
        at += CHUNK_HEADER + stored as usize;
    }
    out
}

#[test]
fn waits_travel_beside_their_blocks_not_in_the_tables() {
    let rec = recording(columns::BLOCK_SAMPLES * 2 + 17);
    let full = bytes(&rec);
    let tags: Vec<_> = chunks(&full).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        tags,
        [
            TAG_META,
            TAG_SAMPLES,
            TAG_WAITS,
            TAG_SAMPLES,
            TAG_WAITS,
            TAG_SAMPLES,
            TAG_WAITS,
            TAG_END
        ]
    );
    // A block cut off after its samples, before its waits: its samples are kept, and
    // the warning says the file is incomplete.
    let (last_waits, _) = chunks(&full)[6];
    let back = read(&full[..last_waits]).expect("read");
    let s = back.sampled.as_ref().expect("sampled");
    assert_eq!(
        s.samples.len(),
        rec.sampled.as_ref().expect("s").samples.len()
    );
    assert!(
        s.waits
            .iter()
            .all(|w| w.sample < 2 * columns::BLOCK_SAMPLES as u32)
    );
    assert!(quality_warnings(&back).join(" ").contains("incomplete"));
}

#[test]
fn a_recording_with_its_waits_in_the_tables_still_reads() {
    // As profmap wrote version 2 before the WAIT chunk: waits in META's JSON.
    let rec = recording(columns::BLOCK_SAMPLES + 99);
    let s = rec.sampled.as_ref().expect("sampled");
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&VERSION.to_le_bytes());
    let head = Recording {
        sampled: Some(s.with_samples(Default::default(), s.waits.clone())),
        ..rec.clone()
    };
    let json = serde_json::to_vec(&head).expect("json");
    let fast = flate2::Compression::fast();
    write_chunk(&mut b, TAG_META, &json, fast).expect("meta");
    for from in [0, columns::BLOCK_SAMPLES] {
        let to = s.samples.len().min(from + columns::BLOCK_SAMPLES);
        let block = columns::encode(&s.samples.woken_range(from..to));
        write_chunk(&mut b, TAG_SAMPLES, &block, fast).expect("block");
    }
    let mut end = Vec::new();
    columns::put_u(&mut end, s.samples.len() as u64);
    columns::put_u(&mut end, 2);
    write_chunk(&mut b, TAG_END, &end, fast).expect("end");
    assert_eq!(read(&b[..]).expect("read"), rec);
    // Waits both there and beside the samples cannot both be right: refused.
    let (end_at, _) = *chunks(&b).last().expect("the end marker");
    let mut both = b[..end_at].to_vec();
    let waits = waits::encode(
        &s.waits.to_vec()[s.waits.len() - 1..],
        columns::BLOCK_SAMPLES as u32,
    );
    write_chunk(&mut both, TAG_WAITS, &waits, fast).expect("waits");
    write_chunk(&mut both, TAG_END, &end, fast).expect("end");
    assert!(read(&both[..]).expect_err("both").contains("both"));
}

#[test]
fn waits_before_any_block_or_past_theirs_stop_the_read_there() {
    let rec = recording(100);
    let full = bytes(&rec);
    let c = chunks(&full);
    let (smpl, waits_at, end) = (c[1].0, c[2].0, c[3].0);
    // The WAIT chunk moved before its block.
    let mut swapped = full[..smpl].to_vec();
    swapped.extend_from_slice(&full[waits_at..end]);
    swapped.extend_from_slice(&full[smpl..waits_at]);
    swapped.extend_from_slice(&full[end..]);
    let back = read(&swapped[..]).expect("read");
    let w = quality_warnings(&back).join(" ");
    assert!(w.contains("follows no sample block"), "{w}");
    let s = back.sampled.as_ref().expect("sampled");
    assert!(s.samples.is_empty() && s.waits.is_empty());
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

#[test]
fn chunks_of_a_newer_profmap_are_skipped_and_named_once() {
    let rec = recording(10);
    let full = bytes(&rec);
    let (end_at, _) = *chunks(&full).last().expect("the end marker");
    let mut b = full[..end_at].to_vec();
    let fast = flate2::Compression::fast();
    for _ in 0..3 {
        write_chunk(&mut b, *b"NEW1", b"later", fast).expect("new");
    }
    b.extend_from_slice(&full[end_at..]);
    let back = read(&b[..]).expect("read");
    assert_eq!(
        back.sampled.as_ref().map(|s| &s.samples),
        rec.sampled.as_ref().map(|s| &s.samples)
    );
    let w = quality_warnings(&back).join(" ");
    assert!(w.contains("does not know (NEW1), skipped"), "{w}");
}
