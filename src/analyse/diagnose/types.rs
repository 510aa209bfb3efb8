//! The diagnosis's output types: the schema's `suspicion_stack`, `optimization_hints`
//! and `wrong_tool_indicators` items (`report::map` re-exports them), and what one rule
//! family returns ([`Finding`], [`RuleOutput`]).

use serde::Serialize;

/// One item of `optimization_hints`: advice backed by a confirmed suspicion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OptimizationHint {
    /// What to change.
    pub hint: String,
    /// The measured figure that supports it.
    pub evidence: String,
    /// The id of the suspicion it confirms, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspicion: Option<String>,
    /// The id of the step it applies to, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Expected gain, percent of wall time: an upper (Amdahl) bound from the measured
    /// share; None when it cannot be estimated.
    pub expected_gain_pct: Option<f64>,
}

/// One item of `suspicion_stack` (schema `$defs/suspicion`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suspicion {
    /// Its id, for hints to refer to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The kind of problem suspected.
    pub category: SuspicionCategory,
    /// Where in the code: the call site `function (file:line)`, or the resource.
    pub location: String,
    /// What is suspected.
    pub description: String,
    /// Ids of the steps it touches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub affected_steps: Vec<String>,
    /// Whether measurement confirmed or dismissed it.
    pub verdict: SuspicionVerdict,
    /// The measured figure behind the verdict.
    pub evidence: String,
    /// How it was checked: the rule and its threshold.
    pub verification_note: String,
    /// Where the suspicion came from, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SuspicionSource>,
}

/// Schema `$defs/suspicion.category`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspicionCategory {
    /// Connections opened, pooled or kept badly.
    ConnectionManagement,
    /// Data moved or converted more than needed.
    DataFlow,
    /// Blocking where work could overlap.
    AsyncPatterns,
    /// Resources created or released at the wrong time.
    ResourceLifecycle,
    /// A setting that slows the target.
    Configuration,
    /// The same work done more than once.
    RedundantWork,
    /// The shape of the system.
    Architecture,
    /// Allocation and memory use.
    Memory,
    /// GPU use.
    Gpu,
    /// Anything else.
    Other,
}

/// Schema `$defs/suspicion.verdict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspicionVerdict {
    /// Measurement supports it.
    Confirmed,
    /// Measurement rules it out.
    Dismissed,
}

/// Schema `$defs/suspicion.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspicionSource {
    /// Raised by a measurement.
    Measured,
    /// Raised by reading the source.
    Static,
    /// Raised by both.
    Both,
}

/// One item of `wrong_tool_indicators`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WrongToolIndicator {
    /// The time goes to an external service with no alternative.
    ExternalServiceNoAlternative,
    /// The figures are within the norm of the industry.
    WithinIndustryNorm,
    /// The limit is the infrastructure, not the code.
    InfrastructureBound,
    /// The code is already optimized.
    AlreadyOptimized,
}

impl WrongToolIndicator {
    /// The schema string.
    pub fn as_str(self) -> &'static str {
        match self {
            WrongToolIndicator::ExternalServiceNoAlternative => "external_service_no_alternative",
            WrongToolIndicator::WithinIndustryNorm => "within_industry_norm",
            WrongToolIndicator::InfrastructureBound => "infrastructure_bound",
            WrongToolIndicator::AlreadyOptimized => "already_optimized",
        }
    }
}

/// One item of `wrong_tool_evidence`: why an indicator of `wrong_tool_indicators` was
/// raised (the schema's indicator list holds bare names).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrongToolEvidence {
    pub indicator: WrongToolIndicator,
    /// The measured figures that triggered it.
    pub evidence: String,
}

/// Advice a confirmed finding carries, before it is ranked into a hint.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// What to change.
    pub hint: String,
    /// Upper bound of the wall-time gain, percent (Amdahl, from the measured share).
    pub gain_pct: Option<f64>,
    /// How the bound was made, appended to the hint's evidence.
    pub gain_basis: String,
}

/// One suspicion a rule raised, with its advice when confirmed.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub suspicion: Suspicion,
    pub advice: Option<Advice>,
    /// The resource it concerns (a peer's or file's name), for the why-chains.
    pub resource: Option<String>,
}

/// What one rule family returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleOutput {
    pub findings: Vec<Finding>,
    /// Why a suspicion could be neither confirmed nor dismissed (evidence missing).
    pub warnings: Vec<String>,
}

impl Finding {
    /// A measured suspicion.
    pub fn new(
        category: SuspicionCategory,
        verdict: SuspicionVerdict,
        location: String,
        description: String,
        evidence: String,
        note: &str,
    ) -> Finding {
        Finding {
            suspicion: Suspicion {
                id: None,
                category,
                location,
                description,
                affected_steps: Vec::new(),
                verdict,
                evidence,
                verification_note: note.to_string(),
                source: Some(SuspicionSource::Measured),
            },
            advice: None,
            resource: None,
        }
    }

    pub fn steps(mut self, steps: Vec<String>) -> Finding {
        self.suspicion.affected_steps = steps;
        self
    }

    pub fn advice(mut self, hint: String, gain_pct: Option<f64>, basis: String) -> Finding {
        self.advice = Some(Advice {
            hint,
            gain_pct: gain_pct.map(|g| (g * 10.0).round() / 10.0),
            gain_basis: basis,
        });
        self
    }

    pub fn on(mut self, resource: &str) -> Finding {
        self.resource = Some(resource.to_string());
        self
    }

    pub fn confirmed(&self) -> bool {
        self.suspicion.verdict == SuspicionVerdict::Confirmed
    }
}
