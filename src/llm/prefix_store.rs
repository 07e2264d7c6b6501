//! Prompt-prefix KV snapshots on disk, so a new process starts warm: planner and executor prompts open with the
//! same system text and tool list on every run, and computing it again costs seconds on a laptop CPU.
//!
//! ```text
//! <root>/<model key>/<prompt hash>.safetensors    `tokens` (u32) and each layer's `k.N`, `v.N`
//!                                                (f32, [1, n_kv_head, len, head_dim]) for one prompt
//! ```
//!
//! The model key hashes what decides the cached values: the model file (path, size, modification time), the
//! device, the kernel choice and this program's version. A snapshot is written under a temporary name and renamed,
//! so a crash leaves none half-written; one that cannot be read is removed and the prompt is computed as if no
//! snapshot existed. The least recently used snapshots beyond [`MAX_SNAPSHOTS`] per model are removed.
//!
//! A store may instead keep its snapshots in this process's memory only ([`PrefixStore::in_memory`]): a server
//! shares its clients' prompt openings between its generation slots without writing them to disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};

use super::LanguageModel;
use crate::{Error, Result};

/// Snapshots kept per model (each is about 57 KB a token for the 1.5B, 25 KB for the 0.5B).
pub const MAX_SNAPSHOTS: usize = 4;

/// Age after which a `.partial` file is taken to be a dead process's leftover.
const STALE_PARTIAL: std::time::Duration = std::time::Duration::from_secs(600);

/// A prompt's cached keys and values, layer by layer.
#[derive(Debug, Clone)]
pub struct KvSnapshot {
    /// The tokens whose positions the snapshot holds.
    pub tokens: Vec<u32>,
    /// `(k, v)` for each layer, `[1, n_kv_head, tokens.len(), head_dim]`.
    pub layers: Vec<(Tensor, Tensor)>,
}

/// Snapshots held in memory, most recently used first, each under the name its file would have.
type Held = Vec<(PathBuf, KvSnapshot)>;

/// The snapshots of one model on one device.
#[derive(Debug, Clone)]
pub struct PrefixStore {
    dir: PathBuf,
    /// Token lists already read, by file. A file's name is the hash of its tokens, so a name never comes to hold
    /// other tokens: the list is read from disk once per process, not on every generation.
    known_tokens: Arc<Mutex<HashMap<PathBuf, Arc<[u32]>>>>,
    /// When set, the snapshots live here (most recently used first, named as their files would be) and the disk
    /// is never read or written.
    memory: Option<Arc<Mutex<Held>>>,
}

impl PrefixStore {
    /// The store under `root` for the model file at `model` running on `device` (nothing is created yet).
    pub fn new(root: &Path, model: &Path, device: &Device) -> Result<Self> {
        let meta = std::fs::metadata(model).map_err(|e| Error::io(format!("reading {}", model.display()), e))?;
        let modified = meta.modified().ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok());
        let identity = format!(
            "{}|{}|{:?}|{:?}|{:?}|{}",
            std::path::absolute(model).unwrap_or_else(|_| model.to_path_buf()).display(),
            meta.len(),
            modified.map(|d| d.as_nanos()),
            device.location(),
            crate::kernels::kernel_choice(),
            env!("CARGO_PKG_VERSION"),
        );
        let key = hex::encode(&Sha256::digest(identity.as_bytes())[..12]);
        let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Self { dir: root.join(format!("{stem}-{key}")), known_tokens: Arc::default(), memory: None })
    }

    /// The directory holding this model's snapshots.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This store, keeping its snapshots in this process's memory instead of on disk (clones share them).
    pub fn in_memory(self) -> Self {
        Self { memory: Some(Arc::default()), ..self }
    }

    fn held(memory: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
        // Every change is a single call on the list: a panic elsewhere leaves it whole.
        memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The snapshot sharing the longest leading run of tokens with `prompt`, if that run is at least `min`
    /// tokens: `(file, shared length)`. Unreadable files are removed.
    pub fn best_match(&self, prompt: &[u32], min: usize) -> Option<(PathBuf, usize)> {
        if let Some(memory) = &self.memory {
            let held = Self::held(memory);
            let shared = held.iter().map(|(name, snapshot)| (name, common_prefix(&snapshot.tokens, prompt)));
            // The first (most recently used) of the longest.
            return shared.filter(|(_, n)| *n >= min).fold(None, |best: Option<(PathBuf, usize)>, (name, n)| {
                if best.as_ref().is_none_or(|(_, b)| n > *b) {
                    Some((name.clone(), n))
                } else {
                    best
                }
            });
        }
        let mut best: Option<(PathBuf, usize)> = None;
        for file in self.snapshot_files() {
            let shared = match self.tokens_of(&file) {
                Ok(tokens) => common_prefix(&tokens, prompt),
                Err(e) => {
                    self.discard(&file, &e);
                    continue;
                }
            };
            if shared >= min && best.as_ref().is_none_or(|(_, n)| shared > *n) {
                best = Some((file, shared));
            }
        }
        best
    }

    /// The first `len` positions of the snapshot in `file`, on `device`. A file that fails to read is removed.
    pub fn load(&self, file: &Path, len: usize, device: &Device) -> Result<KvSnapshot> {
        if let Some(memory) = &self.memory {
            let snapshot = {
                let mut held = Self::held(memory);
                let at = held
                    .iter()
                    .position(|(name, _)| name == file)
                    .ok_or_else(|| candle_core::Error::Msg(format!("snapshot {} is no longer held", file.display())))?;
                let entry = held.remove(at);
                held.insert(0, entry);
                held[0].1.clone()
            };
            if len == 0 || len > snapshot.tokens.len() {
                let held = snapshot.tokens.len();
                return Err(candle_core::Error::Msg(format!("snapshot holds {held} tokens, {len} asked for")).into());
            }
            // Copies: the model's cache must never share storage with a held snapshot (caches write in place).
            let mut layers = Vec::with_capacity(snapshot.layers.len());
            for (k, v) in &snapshot.layers {
                layers.push((
                    k.narrow(2, 0, len)?.to_device(device)?.copy()?,
                    v.narrow(2, 0, len)?.to_device(device)?.copy()?,
                ));
            }
            return Ok(KvSnapshot { tokens: snapshot.tokens[..len].to_vec(), layers });
        }
        let loaded = read_snapshot(file, len, device);
        match &loaded {
            Ok(_) => touch(file),
            Err(e) => self.discard(file, e),
        }
        loaded
    }

    /// Writes `snapshot` (atomically: a temporary file, then a rename), then removes the least recently used
    /// snapshots beyond [`MAX_SNAPSHOTS`].
    pub fn save(&self, snapshot: &KvSnapshot) -> Result<PathBuf> {
        if let Some(memory) = &self.memory {
            let name = self.dir.join(format!("{}.safetensors", snapshot_name(&snapshot.tokens)));
            // Copies: the exported layers may share storage with the model's cache, which is written in place.
            let mut layers = Vec::with_capacity(snapshot.layers.len());
            for (k, v) in &snapshot.layers {
                layers.push((k.copy()?, v.copy()?));
            }
            let mut held = Self::held(memory);
            held.retain(|(held_name, _)| held_name != &name);
            held.insert(0, (name.clone(), KvSnapshot { tokens: snapshot.tokens.clone(), layers }));
            held.truncate(MAX_SNAPSHOTS);
            return Ok(name);
        }
        let io = |what: &str, e| Error::io(format!("{what} {}", self.dir.display()), e);
        std::fs::create_dir_all(&self.dir).map_err(|e| io("creating", e))?;
        let mut tensors = HashMap::new();
        let n = snapshot.tokens.len();
        tensors.insert("tokens".to_string(), Tensor::from_slice(&snapshot.tokens, n, &Device::Cpu)?);
        for (i, (k, v)) in snapshot.layers.iter().enumerate() {
            tensors.insert(format!("k.{i}"), k.to_device(&Device::Cpu)?.to_dtype(DType::F32)?);
            tensors.insert(format!("v.{i}"), v.to_device(&Device::Cpu)?.to_dtype(DType::F32)?);
        }
        let name = snapshot_name(&snapshot.tokens);
        let file = self.dir.join(format!("{name}.safetensors"));
        // Unique per process and per write: generations batched in one process may save the same prefix at once.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let partial = self.dir.join(format!("{name}.safetensors.{}-{write}.partial", std::process::id()));
        let written = candle_core::safetensors::save(&tensors, &partial)
            .map_err(Error::from)
            .and_then(|()| std::fs::rename(&partial, &file).map_err(|e| io("writing a snapshot into", e)));
        if let Err(e) = written {
            // A full disk or a crash of the rename: leave no partial file behind.
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        self.evict();
        Ok(file)
    }

    /// Snapshot files, most recently used first.
    fn snapshot_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut files: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH), p))
            .collect();
        files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        files.into_iter().map(|(_, p)| p).collect()
    }

    /// Removes the least recently used snapshots beyond [`MAX_SNAPSHOTS`], and partial files that a killed
    /// process left (older than [`STALE_PARTIAL`]; a younger one may still be being written).
    fn evict(&self) {
        for old in self.snapshot_files().into_iter().skip(MAX_SNAPSHOTS) {
            self.known().remove(&old);
            let _ = std::fs::remove_file(old);
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            let stale = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_PARTIAL);
            if stale && path.extension().is_some_and(|x| x == "partial") {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The tokens `file` holds, read once.
    fn tokens_of(&self, file: &Path) -> Result<Arc<[u32]>> {
        if let Some(tokens) = self.known().get(file) {
            return Ok(tokens.clone());
        }
        let tokens: Arc<[u32]> = read_tokens(file)?.into();
        self.known().insert(file.to_path_buf(), tokens.clone());
        Ok(tokens)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<[u32]>>> {
        // A panic elsewhere while holding the lock leaves the map intact (inserts and removes are single calls).
        self.known_tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn discard(&self, file: &Path, error: &dyn std::fmt::Display) {
        tracing::warn!(file = %file.display(), %error, "removing an unreadable prompt-prefix snapshot");
        self.known().remove(file);
        let _ = std::fs::remove_file(file);
    }
}

/// A snapshot's name: the hash of its tokens.
fn snapshot_name(tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    hex::encode(&Sha256::digest(&bytes)[..12])
}

fn read_tokens(file: &Path) -> Result<Vec<u32>> {
    // Memory-mapped: only the token list is read, not the keys and values.
    // SAFETY: snapshot files are never modified in place: `save` writes a process-unique `.partial` file and
    // renames it over the name, and eviction only unlinks, which leaves a mapped file's pages intact. The map is
    // dropped before this returns; `to_vec1` copies the tokens out of it.
    let tensors = unsafe { candle_core::safetensors::MmapedSafetensors::new(file)? };
    Ok(tensors.load("tokens", &Device::Cpu)?.to_vec1::<u32>()?)
}

fn read_snapshot(file: &Path, len: usize, device: &Device) -> Result<KvSnapshot> {
    // SAFETY: as in `read_tokens`: the file is replaced only by rename or unlinked, never rewritten in place, and
    // every tensor loaded from the map is copied into its own storage on `device` before the map is dropped.
    let tensors = unsafe { candle_core::safetensors::MmapedSafetensors::new(file)? };
    let tokens = tensors.load("tokens", &Device::Cpu)?.to_vec1::<u32>()?;
    if len == 0 || len > tokens.len() {
        return Err(candle_core::Error::Msg(format!("snapshot holds {} tokens, {len} asked for", tokens.len())).into());
    }
    let mut layers = Vec::new();
    while let (Ok(k), Ok(v)) =
        (tensors.load(&format!("k.{}", layers.len()), device), tensors.load(&format!("v.{}", layers.len()), device))
    {
        let (_, _, positions, _) = k.dims4()?;
        if positions != tokens.len() || v.dims() != k.dims() {
            return Err(candle_core::Error::Msg(format!("snapshot layer {} has the wrong shape", layers.len())).into());
        }
        layers.push((k.narrow(2, 0, len)?.contiguous()?, v.narrow(2, 0, len)?.contiguous()?));
    }
    if layers.is_empty() {
        return Err(candle_core::Error::Msg("snapshot holds no layers".into()).into());
    }
    Ok(KvSnapshot { tokens: tokens[..len].to_vec(), layers })
}

/// Fewest prompt tokens worth a snapshot: restoring must save more than it costs to read the file, and saving is
/// for the long shared openings (system text, tool lists), not a goal's last few words.
pub const MIN_SNAPSHOT_TOKENS: usize = 64;

/// Before a prompt's prefill: if a snapshot shares more of `prompt` than the `reused` positions already cached
/// (by at least [`MIN_SNAPSHOT_TOKENS`]), loads it into `model`. Returns the positions now reusable. A snapshot
/// that fails to load is logged and skipped: the prompt is then computed as usual.
pub fn restore(
    store: &PrefixStore,
    model: &mut dyn LanguageModel,
    prompt: &[u32],
    reused: usize,
    device: &Device,
) -> usize {
    // No snapshot can add the minimum when the prompt's uncached tail is shorter: skip the disk.
    if prompt.len() < reused + MIN_SNAPSHOT_TOKENS {
        return reused;
    }
    let Some((file, shared)) = store.best_match(prompt, reused + MIN_SNAPSHOT_TOKENS) else { return reused };
    // At least one prompt token is always run, to get its logits.
    let shared = shared.min(prompt.len() - 1);
    let restored = store.load(&file, shared, device).and_then(|snapshot| model.import_kv(&snapshot));
    match restored {
        Ok(true) => {
            tracing::debug!(file = %file.display(), tokens = shared, "restored a prompt-prefix snapshot");
            shared
        }
        Ok(false) => reused,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "could not restore a prompt-prefix snapshot");
            model.clear_kv_cache();
            0
        }
    }
}

/// After a prompt's prefill: what to save, and when.
///
/// Without `stable` (a prompt of unknown make-up), its positions are saved when the prompt is long enough and
/// fewer than [`MIN_SNAPSHOT_TOKENS`] of them were reused, from memory or disk. So each family of prompts is
/// written once, by its first call, and not again for every goal or replan that only changes its tail.
///
/// With `stable`, the prompt's first `stable` tokens (the caller's part shared by every prompt of the family,
/// such as a system message with the tool list) are saved, and only they, whenever at least
/// [`MIN_SNAPSHOT_TOKENS`] of them had to be computed: the snapshot holds no goal for later prompts to skip past,
/// and a family whose opening changed (a tool added to the catalogue) gets a snapshot of the new opening even if
/// the old one still covered its first tools. Failures are logged, not returned: the snapshot is an
/// optimisation and the generation goes on.
pub fn save_after_prefill(
    store: &PrefixStore,
    model: &dyn LanguageModel,
    prompt: &[u32],
    reused: usize,
    stable: Option<usize>,
) {
    let len = match stable {
        None if prompt.len() < MIN_SNAPSHOT_TOKENS || reused >= MIN_SNAPSHOT_TOKENS => return,
        None => prompt.len(),
        Some(stable) if stable.min(prompt.len()) < reused + MIN_SNAPSHOT_TOKENS => return,
        Some(stable) => stable.min(prompt.len()),
    };
    let saved = model.export_kv(len).and_then(|layers| match layers {
        Some(layers) => store.save(&KvSnapshot { tokens: prompt[..len].to_vec(), layers }).map(Some),
        None => Ok(None),
    });
    match saved {
        Ok(Some(file)) => {
            tracing::debug!(file = %file.display(), tokens = len, "saved a prompt-prefix snapshot")
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not save a prompt-prefix snapshot"),
    }
}

/// Marks a snapshot as just used (eviction removes the least recently used).
fn touch(file: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(file) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// How many leading tokens `a` and `b` share.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
