//! Other tools' formats, one file each behind one trait ([`Exporter`]): collapsed stacks
//! (`folded`), pprof, speedscope, the Firefox Profiler, Chrome trace events; and inferno
//! flamegraphs (`flamegraph`, written with every deep profile).
//!
//! Every exporter is fed the same [`Input`] — the recording, and per sample the wait
//! category and resource the analysis gave it — and writes bytes to the writer it is
//! handed, as it makes them: it never re-reads /proc, re-runs anything or touches the
//! file system (the session hands it a temporary file beside the final name and commits
//! it, so that a timeline export of millions of samples never sits in memory whole).
//! Indices from the recording are validated on read (`profile::validate`); an exporter
//! still uses `get` rather than indexing, since it must never panic on input.

pub mod chrome;
pub mod firefox;
pub mod flamegraph;
pub mod folded;
pub mod pprof;
pub mod speedscope;
#[cfg(test)]
mod test_profile;

use std::io::Write;

use std::borrow::Cow;

use crate::analyse::{Categories, SampleResources, WaitCategory};
use crate::error::Error;
use crate::plan::ExportFormat;
use crate::profile::{Recording, SampledProfile};

/// What an exporter is fed.
#[derive(Debug)]
pub struct Input<'a> {
    /// The whole recording (baseline and timeline included).
    pub rec: &'a Recording,
    /// Its deep profile, without profmap's own activity (the profile the analysis
    /// worked on, so `categories` and `resources` index its samples).
    pub profile: Cow<'a, SampledProfile>,
    /// Per sample (same index): the wait category the analysis gave it (`cpu` for
    /// on-CPU samples). Borrowed from the analysis when there is one (a table per
    /// sample: not copied).
    pub categories: Cow<'a, Categories>,
    /// What samples waited on (index into `profile.resources`).
    pub resources: Cow<'a, SampleResources>,
}

impl<'a> Input<'a> {
    /// The input for `rec`; None when it holds no deep profile (a `bench` session).
    /// profmap's own activity is dropped from `rec`'s profile in place (see
    /// `analyse::OwnActivity`): a filtered copy beside it would hold every sample twice.
    pub fn new(rec: &'a mut Recording) -> Option<Input<'a>> {
        let p = rec.sampled.as_mut()?;
        let profiler_ns = crate::analyse::OwnActivity::find(p).map_or(0, |own| own.drop_from(p));
        let rec: &'a Recording = rec;
        let analysed = crate::analyse::Analysed::dropped(rec.sampled.as_ref()?, profiler_ns);
        let a = analysed.analyse();
        Some(Input {
            rec,
            profile: analysed.profile,
            categories: Cow::Owned(a.call_tree.sample_categories),
            resources: Cow::Owned(a.call_tree.sample_resources),
        })
    }

    /// The input for `rec` when its profile (as [`crate::analyse::analysed_profile`]
    /// gives it) has been analysed already.
    pub fn with_analysis(
        rec: &'a Recording,
        profile: Cow<'a, SampledProfile>,
        a: &'a crate::analyse::Analysis,
    ) -> Input<'a> {
        Input {
            rec,
            profile,
            categories: Cow::Borrowed(&a.call_tree.sample_categories),
            resources: Cow::Borrowed(&a.call_tree.sample_resources),
        }
    }

    /// Sample `i`'s category (`other` when out of range).
    pub fn category(&self, i: usize) -> WaitCategory {
        self.categories.get(i).unwrap_or(WaitCategory::Other)
    }

    /// The name of the resource sample `i` waited on, when known.
    pub fn resource_name(&self, i: usize) -> Option<&str> {
        let r = self.resources.get(i)?;
        self.profile
            .resources
            .get(r as usize)
            .map(crate::analyse::resources::shown_name)
    }
}

/// One other tool's format.
pub trait Exporter {
    /// The format it writes.
    fn format(&self) -> ExportFormat;
    /// The file it writes into an output folder (`profile.pb.gz`).
    fn file_name(&self) -> &'static str;
    /// Write the whole file.
    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<(), Error>;
}

/// The exporter of `format`.
pub fn exporter(format: ExportFormat) -> &'static dyn Exporter {
    match format {
        ExportFormat::Folded => &folded::Folded,
        ExportFormat::Pprof => &pprof::Pprof,
        ExportFormat::Speedscope => &speedscope::Speedscope,
        ExportFormat::Firefox => &firefox::Firefox,
        ExportFormat::Chrome => &chrome::Chrome,
    }
}

/// Every exporter's file name, for the output folder's list of own files.
pub fn file_names() -> Vec<&'static str> {
    ExportFormat::ALL
        .iter()
        .map(|&f| exporter(f).file_name())
        .collect()
}

/// Write `format` of `input` into a buffer (the session writes straight into files).
#[cfg(test)]
pub fn to_bytes(format: ExportFormat, input: &Input) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    exporter(format).write(input, &mut buf)?;
    Ok(buf)
}

/// The elements of a JSON array written one by one (a comma before each but the first):
/// the timeline exports write their events as they make them, never the whole file.
#[derive(Debug, Default)]
pub(crate) struct JsonItems {
    started: bool,
}

impl JsonItems {
    /// Begin the array's next element (a comma unless it is the first), which the
    /// caller then writes.
    pub(crate) fn next(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if std::mem::replace(&mut self.started, true) {
            out.write_all(b",")?;
        }
        Ok(())
    }

    /// Write `v` as the array's next element.
    pub(crate) fn put<T: serde::Serialize>(
        &mut self,
        out: &mut impl Write,
        v: &T,
    ) -> std::io::Result<()> {
        self.next(out)?;
        serde_json::to_writer(&mut *out, v).map_err(std::io::Error::from)
    }
}

/// Write export `format` with `f` into `out` behind a buffer of its own (so that the
/// many small writes of a JSON export go to a concrete type, inlined, rather than
/// through `dyn Write` one by one: a third of the Chrome trace's time was those calls),
/// then flush; an I/O error as profmap's error.
pub(crate) fn write_buffered(
    format: ExportFormat,
    out: &mut dyn Write,
    f: impl FnOnce(&mut std::io::BufWriter<&mut dyn Write>) -> std::io::Result<()>,
) -> Result<(), Error> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    f(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| write_error(format, e))
}

/// An I/O error while writing an export, as profmap's error.
pub fn write_error(format: ExportFormat, e: std::io::Error) -> Error {
    Error::Tool(format!("writing the {} export failed: {e}", format.name()))
}
