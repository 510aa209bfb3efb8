//! The messages of pprof's `profile.proto` (github.com/google/pprof, package
//! `perftools.profiles`), written by hand as prost structs so no `protoc` is needed.
//!
//! Invariants the encoder relies on (the format's own rules):
//! - every `int64` that names a string is an index into `Profile::string_table`, whose
//!   entry 0 is "";
//! - mapping, location and function ids are non-zero and unique; 0 means "none";
//! - `Sample::location_id` runs leaf first; `Sample::value` has one entry per
//!   `Profile::sample_type`;
//! - `Location::line` runs innermost first: inlined callees, then the function the
//!   machine code belongs to, last.
//!
//! Field numbers follow profile.proto exactly; fields profmap never writes (drop/keep
//! frames) are still declared so that decoding a foreign file keeps them.

/// A whole profile.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each entry of `Sample::value` measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The binaries and shared objects the code came from.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations (a machine-code site with its inlined calls).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions named by the locations' lines.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string, entry 0 "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regex of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regex of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken, ns since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it covers, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sampling period measures.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period, in `period_type` units.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index of its `type`).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A measured quantity and its unit, e.g. `cpu` / `nanoseconds`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// String index of the type.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// String index of the unit.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack with its values and labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels (string or number).
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A key with a string or a numeric value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// String index of the key.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String index of the value (0 for a numeric label).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// The numeric value (with `str` 0).
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// String index of `num`'s unit.
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A binary or shared object.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Load address (0: unknown).
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End of the loaded range (0: unknown).
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// String index of the file's path or name.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// String index of the build ID (hex), 0 when unknown.
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Its locations already carry function names (no symbolization needed).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// ... and source file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// ... and line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// ... and inlined calls.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// A code location: a function with the calls inlined into it at that point.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The mapping's id, 0 for none.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Instruction address (0: unknown).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Innermost (inlined) first, the containing function last.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Several functions folded into one by the linker.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and line within a location.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column (0: unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// String index of the (demangled) name.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// String index of the name as the system knows it.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// String index of the source file.
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line of the function (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
