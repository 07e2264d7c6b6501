//! The workspace directory that file tools are confined to.
//!
//! A path given to a tool must be relative, must not contain `..`, and after symlinks are resolved must still lie
//! inside the workspace. The checks are made when the path is resolved; a symlink swapped in between the check
//! and the use is not defended against here (writes open with `O_NOFOLLOW` on Unix, which covers the last
//! component).

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use super::error::{ToolError, ToolResult};

/// A directory that file tools may not leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

fn outside(path: &str, reason: impl Into<String>) -> ToolError {
    ToolError::OutsideWorkspace { path: path.to_string(), reason: reason.into() }
}

impl Workspace {
    /// Opens an existing directory as the workspace (its canonical path is kept).
    pub fn new(root: impl AsRef<Path>) -> ToolResult<Self> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given)
            .map_err(|source| ToolError::Workspace { path: given.to_path_buf(), source })?;
        if !root.is_dir() {
            return Err(ToolError::Workspace {
                path: given.to_path_buf(),
                source: std::io::Error::new(ErrorKind::NotADirectory, "not a directory"),
            });
        }
        Ok(Self { root })
    }

    /// The canonical workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path relative to the workspace after the lexical checks: not absolute, no `..`.
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
        Ok(relative)
    }

    fn check_inside(&self, path: &str, resolved: &Path) -> ToolResult<()> {
        if resolved.starts_with(&self.root) {
            Ok(())
        } else {
            Err(outside(path, "it resolves (through a symlink) to a place outside the workspace"))
        }
    }

    /// Resolves a path that must exist (for reading and listing); symlinks are followed and must stay inside.
    pub fn resolve_existing(&self, tool: &str, path: &str) -> ToolResult<PathBuf> {
        let joined = self.root.join(Self::relative(path)?);
        let resolved = std::fs::canonicalize(&joined).map_err(|source| {
            if source.kind() == ErrorKind::NotFound {
                ToolError::Missing { tool: tool.to_string(), path: path.to_string(), hint: self.where_else(path) }
            } else {
                ToolError::Io { tool: tool.to_string(), action: "resolving", path: PathBuf::from(path), source }
            }
        })?;
        self.check_inside(path, &resolved)?;
        Ok(resolved)
    }

    /// What to tell a caller that named a missing path: the places in the workspace holding a file of that name
    /// (a planner that guessed the directory wrong can retry with one), else how to look.
    fn where_else(&self, path: &str) -> String {
        let Some(name) = Path::new(path).file_name() else { return "list_dir shows what the workspace holds".into() };
        let mut found = Vec::new();
        let mut pending = vec![(self.root.clone(), 0)];
        let mut visited = 0;
        'walk: while let Some((dir, depth)) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                visited += 1;
                // Bounded: a huge workspace must not turn an error message into a crawl.
                if visited > 5000 || found.len() >= 5 {
                    break 'walk;
                }
                let Ok(kind) = entry.file_type() else { continue };
                if kind.is_dir() && depth < 6 {
                    pending.push((entry.path(), depth + 1));
                } else if kind.is_file() && entry.file_name() == name {
                    if let Ok(relative) = entry.path().strip_prefix(&self.root) {
                        found.push(relative.display().to_string());
                    }
                }
            }
        }
        found.sort();
        match found.as_slice() {
            [] => "list_dir shows what the workspace holds".into(),
            places => format!("a file of that name is at {}", places.join(", ")),
        }
    }

    /// Resolves a file path to write, creating missing parent directories inside the workspace. An existing
    /// target that is a symlink must point inside; a dangling symlink is refused.
    pub fn resolve_for_write(&self, tool: &str, path: &str) -> ToolResult<PathBuf> {
        let relative = Self::relative(path)?;
        let Some(file_name) = relative.file_name().map(|n| n.to_os_string()) else {
            return Err(ToolError::InvalidArgs { tool: tool.to_string(), message: format!("'{path}' names no file") });
        };
        let io = |action: &'static str, at: &Path, source: std::io::Error| ToolError::Io {
            tool: tool.to_string(),
            action,
            path: at.to_path_buf(),
            source,
        };
        let mut dir = self.root.clone();
        for part in relative.parent().into_iter().flat_map(Path::components) {
            let next = dir.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    let resolved = std::fs::canonicalize(&next).map_err(|e| io("resolving", &next, e))?;
                    self.check_inside(path, &resolved)?;
                    if !resolved.is_dir() {
                        return Err(io("using as a directory", &next, ErrorKind::NotADirectory.into()));
                    }
                    dir = resolved;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    std::fs::create_dir(&next).map_err(|e| io("creating directory", &next, e))?;
                    dir = next;
                }
                Err(e) => return Err(io("inspecting", &next, e)),
            }
        }
        let target = dir.join(file_name);
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let resolved = std::fs::canonicalize(&target)
                    .map_err(|_| outside(path, "it is a symlink whose target does not exist"))?;
                self.check_inside(path, &resolved)?;
                Ok(resolved)
            }
            Ok(meta) if meta.is_dir() => Err(io("writing", &target, ErrorKind::IsADirectory.into())),
            Ok(_) => Ok(target),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(target),
            Err(e) => Err(io("inspecting", &target, e)),
        }
    }
}
