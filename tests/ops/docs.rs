//! The docs stay true to the tree: every relative link of README.md, CONTRIBUTING.md and docs/
//! resolves (to a file, and to a heading where it names one), and every repository path they
//! name in backticks (`crates/keyfire/src/...`, `tests/api/...`) exists. The README's Rust
//! snippet is compiled as a doctest elsewhere; this keeps the prose's paths honest.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The markdown files checked: the top-level guides and everything under docs/.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md"]
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect();
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                docs.push(path);
            }
        }
    }
    docs.sort();
    docs
}

/// The text outside fenced code blocks (code is not prose: its paths are examples).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// GitHub's anchor of a heading: lower case, backticks and punctuation dropped (but `-` and
/// `_`), spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings.
fn anchors(text: &str) -> HashSet<String> {
    prose(text)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// `(target, line)` of every inline link `[text](target)` in the prose.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in prose(text).lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((after[..end].trim().to_string(), n + 1));
            rest = &after[end..];
        }
    }
    out
}

/// Top-level folders and files of the repository a backticked path may start with.
const TOP: &[&str] = &[
    "crates/",
    "src/",
    "tests/",
    "docs/",
    "examples/",
    "deploy/",
    "bench/",
    "clients/",
    "redis/",
    ".ci/",
];

/// `(path, line)` of every backticked repository path in the prose: it starts with a
/// top-level folder, holds no wildcard or placeholder, and names a file with an extension or
/// ends in `/`.
fn named_paths(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in prose(text).lines().enumerate() {
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let p = part.trim();
            let candidate = TOP.iter().any(|t| p.starts_with(t))
                && !p.contains(|c: char| c.is_whitespace() || "*<>{}…$".contains(c))
                && !p.contains("...");
            if candidate {
                // `path:line` or `path::item` names a place in the file.
                let file = p.split(':').next().unwrap_or(p);
                out.push((file.to_string(), n + 1));
            }
        }
    }
    out
}

/// Every problem of one document: links and named paths that do not resolve.
fn problems(root: &Path, doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap();
    let dir = doc.parent().unwrap();
    let name = doc.strip_prefix(root).unwrap().display().to_string();
    let mut out = Vec::new();
    for (target, line) in links(&text) {
        if target.is_empty()
            || target.contains("://")
            || target.starts_with("mailto:")
            || target.starts_with('<')
        {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let path = if file.is_empty() {
            doc.to_path_buf()
        } else {
            dir.join(file)
        };
        if !path.exists() {
            out.push(format!("{name}:{line}: link to {target}: no such file"));
            continue;
        }
        if let Some(anchor) = anchor
            && path.extension().is_some_and(|e| e == "md")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            if !anchors(&text).contains(anchor) {
                out.push(format!("{name}:{line}: link to {target}: no such heading"));
            }
        }
    }
    for (path, line) in named_paths(&text) {
        if !root.join(&path).exists() {
            out.push(format!("{name}:{line}: names {path}, which does not exist"));
        }
    }
    out
}

#[test]
fn every_link_and_path_in_the_docs_resolves() {
    let root = root();
    let docs = documents(&root);
    assert!(docs.len() > 5, "found only {docs:?}");
    let problems: Vec<String> = docs.iter().flat_map(|d| problems(&root, d)).collect();
    assert!(
        problems.is_empty(),
        "{} stale link(s) or path(s) in the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_stale_link_a_missing_heading_and_a_stale_path_are_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(
        dir.path().join("docs/a.md"),
        "# A title\n\n## `Some` heading, here\n",
    )
    .unwrap();
    let doc = dir.path().join("docs/b.md");
    std::fs::write(
        &doc,
        "See [a](a.md#some-heading-here), [gone](gone.md), [bad](a.md#nope) and \
         `crates/none.rs`.\n\n```sh\ncat crates/also-none.rs\n```\n",
    )
    .unwrap();
    let found = problems(dir.path(), &doc);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("gone.md: no such file"), "{found:#?}");
    assert!(
        found[1].contains("a.md#nope: no such heading"),
        "{found:#?}"
    );
    assert!(found[2].contains("crates/none.rs"), "{found:#?}");
}
