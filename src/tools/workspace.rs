//! The workspace directory that file tools are confined to.
//!
//! A path given to a tool must be relative and must not contain `..` (checked first, for a clear message). It is
//! then opened beneath a directory handle held for the workspace (`cap-std`: `openat2` with `RESOLVE_BENEATH` on
//! Linux, elsewhere one `openat` per component with each link resolved by the crate), so every symlink is resolved
//! as the path is opened and one that leads out is refused. There is no gap between a check and the use: a symlink
//! swapped in at any moment cannot take a read, a listing or a write outside.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::{Dir, OpenOptions};

use super::error::{ToolError, ToolResult};

/// A directory that file tools may not leave.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// The open directory every path is resolved beneath; shared by the clones of one context.
    dir: Arc<Dir>,
}

impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Workspace {}

/// One entry of a workspace directory, as `list_dir` shows it (symlinks are not followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name.
    pub name: OsString,
    /// `file`, `dir` or `symlink`.
    pub kind: &'static str,
    /// Its size in bytes (that of the link itself for a symlink).
    pub size: u64,
}

fn outside(path: &str, reason: impl Into<String>) -> ToolError {
    ToolError::OutsideWorkspace { path: path.to_string(), reason: reason.into() }
}

/// Whether an error from a beneath-the-handle open means the path led out of the workspace: `cap-std` reports
/// that (the kernel's `EXDEV` from `RESOLVE_BENEATH`, or its own check) as a permission error that carries no OS
/// error number, unlike a real `EACCES`.
fn is_escape(error: &std::io::Error) -> bool {
    error.kind() == ErrorKind::PermissionDenied && error.raw_os_error().is_none()
}

impl Workspace {
    /// Opens an existing directory as the workspace (its canonical path is kept for messages and for the
    /// programs that run in it).
    pub fn new(root: impl AsRef<Path>) -> ToolResult<Self> {
        let given = root.as_ref();
        let unusable = |source| ToolError::Workspace { path: given.to_path_buf(), source };
        let root = std::fs::canonicalize(given).map_err(unusable)?;
        if !root.is_dir() {
            return Err(unusable(std::io::Error::new(ErrorKind::NotADirectory, "not a directory")));
        }
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(unusable)?;
        Ok(Self { root, dir: Arc::new(dir) })
    }

    /// The canonical workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path relative to the workspace after the lexical checks: not absolute, no `..`; `.` when empty.
    fn relative(path: &str) -> ToolResult<PathBuf> {
        let candidate = Path::new(path);
        if candidate.has_root() || candidate.is_absolute() {
            return Err(outside(path, "absolute paths are not allowed; give a path relative to the workspace"));
        }
        let mut relative = PathBuf::new();
        for component in candidate.components() {
            match component {
                Component::Normal(part) => relative.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(outside(path, "'..' is not allowed in paths")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(outside(path, "absolute paths are not allowed; give a path relative to the workspace"))
                }
            }
        }
        if relative.as_os_str().is_empty() {
            relative.push(".");
        }
        Ok(relative)
    }

    /// The tool error for a failed open of `path`: outside, missing (with a hint) or plain I/O.
    fn open_error(&self, tool: &str, action: &'static str, path: &str, source: std::io::Error) -> ToolError {
        if is_escape(&source) {
            outside(path, "it resolves (through a symlink) to a place outside the workspace")
        } else if source.kind() == ErrorKind::NotFound {
            ToolError::Missing { tool: tool.to_string(), path: path.to_string(), hint: self.where_else(path) }
        } else {
            ToolError::Io { tool: tool.to_string(), action, path: PathBuf::from(path), source }
        }
    }

    /// Runs `open` on the relative path beneath the handle. A path refused as leading out gets one more try in
    /// its resolved form, when that lies inside: the kernel refuses every absolute symlink beneath a handle, even
    /// one that points into the workspace, and such links should keep working. The retry is again beneath the
    /// handle, so a link swapped in meanwhile is refused all the same.
    fn beneath<T>(
        &self,
        tool: &str,
        action: &'static str,
        path: &str,
        relative: &Path,
        open: impl Fn(&Path) -> std::io::Result<T>,
    ) -> ToolResult<T> {
        let error = match open(relative) {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if is_escape(&error) {
            if let Some(resolved) = self.resolved_inside(relative) {
                return open(&resolved).map_err(|e| self.open_error(tool, action, path, e));
            }
        }
        Err(self.open_error(tool, action, path, error))
    }

    /// The path with its symlinks resolved, relative to the workspace, when it lies inside (for a path that does
    /// not exist yet, its parent resolved and its name kept).
    fn resolved_inside(&self, relative: &Path) -> Option<PathBuf> {
        let joined = self.root.join(relative);
        let resolved = match std::fs::canonicalize(&joined) {
            Ok(resolved) => resolved,
            Err(_) => std::fs::canonicalize(joined.parent()?).ok()?.join(joined.file_name()?),
        };
        let relative = resolved.strip_prefix(&self.root).ok()?.to_path_buf();
        Some(if relative.as_os_str().is_empty() { PathBuf::from(".") } else { relative })
    }

    /// Opens an existing file for reading; symlinks are followed and must stay inside.
    pub fn open_read(&self, tool: &str, path: &str) -> ToolResult<std::fs::File> {
        let relative = Self::relative(path)?;
        Ok(self.beneath(tool, "opening", path, &relative, |at| self.dir.open(at))?.into_std())
    }

    /// Lists an existing directory (symlinks followed on the way, which must stay inside); entries unsorted.
    pub fn list(&self, tool: &str, path: &str) -> ToolResult<Vec<Entry>> {
        let relative = Self::relative(path)?;
        let dir = self.beneath(tool, "opening", path, &relative, |at| self.dir.open_dir(at))?;
        let io =
            |source| ToolError::Io { tool: tool.to_string(), action: "listing", path: PathBuf::from(path), source };
        let mut entries = Vec::new();
        for entry in dir.entries().map_err(io)? {
            let entry = entry.map_err(io)?;
            let meta = entry.metadata().map_err(io)?;
            let kind = if meta.file_type().is_symlink() {
                "symlink"
            } else if meta.is_dir() {
                "dir"
            } else {
                "file"
            };
            entries.push(Entry { name: entry.file_name(), kind, size: meta.len() });
        }
        Ok(entries)
    }

    /// What to tell a caller that named a missing path: the places in the workspace holding a file of that name
    /// (a planner that guessed the directory wrong can retry with one), else how to look. The walk goes through
    /// the workspace handle and never into a symlink.
    fn where_else(&self, path: &str) -> String {
        let Some(name) = Path::new(path).file_name() else { return "list_dir shows what the workspace holds".into() };
        let mut found = Vec::new();
        let Ok(top) = self.dir.try_clone() else { return "list_dir shows what the workspace holds".into() };
        let mut pending = vec![(top, PathBuf::new(), 0)];
        let mut visited = 0;
        'walk: while let Some((dir, at, depth)) = pending.pop() {
            let Ok(entries) = dir.entries() else { continue };
            for entry in entries.flatten() {
                visited += 1;
                // Bounded: a huge workspace must not turn an error message into a crawl.
                if visited > 5000 || found.len() >= 5 {
                    break 'walk;
                }
                let Ok(kind) = entry.file_type() else { continue };
                if kind.is_dir() && depth < 6 {
                    if let Ok(sub) = entry.open_dir() {
                        pending.push((sub, at.join(entry.file_name()), depth + 1));
                    }
                } else if kind.is_file() && entry.file_name() == name {
                    found.push(at.join(entry.file_name()).display().to_string());
                }
            }
        }
        found.sort();
        match found.as_slice() {
            [] => "list_dir shows what the workspace holds".into(),
            places => format!("a file of that name is at {}", places.join(", ")),
        }
    }

    /// Opens a file for writing (truncated, or appended to), creating it and its missing parent directories inside
    /// the workspace. An existing target or directory on the way that is a symlink must lead inside.
    pub fn open_write(&self, tool: &str, path: &str, append: bool) -> ToolResult<std::fs::File> {
        let relative = Self::relative(path)?;
        if relative.file_name().is_none() {
            return Err(ToolError::InvalidArgs { tool: tool.to_string(), message: format!("'{path}' names no file") });
        }
        if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty()) {
            // Missing directories are made one by one beneath the handle; an existing one is only opened, so a
            // link on the way that leads out is named as such rather than as "file exists".
            self.beneath(tool, "creating directory", path, parent, |at| match self.dir.open_dir(at) {
                Err(e) if e.kind() == ErrorKind::NotFound => self.dir.create_dir_all(at),
                opened => opened.map(drop),
            })?;
        }
        let mut options = OpenOptions::new();
        options.create(true).write(true);
        if append {
            options.append(true);
        } else {
            options.truncate(true);
        }
        let file = self.beneath(tool, "writing", path, &relative, |at| self.dir.open_with(at, &options))?;
        Ok(file.into_std())
    }
}
