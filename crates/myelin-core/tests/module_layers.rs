//! The core's top-level modules form layers: no module imports (directly or
//! through others) a module that imports it back. A circle means a change
//! to any module of it can break all of them, and that a new transport or
//! entity cannot be understood on its own (see ARCHITECTURE.md, "Layers,
//! no circles").
//!
//! Imports are read from the sources: every `crate::<module>` path and every
//! `use crate::{…}` group, outside comments.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules and the files of each.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut mods = BTreeMap::new();
    for entry in fs::read_dir(src).expect("read src") {
        let path = entry.expect("dir entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name == "lib" {
            continue;
        }
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path.clone());
        } else {
            continue;
        }
        mods.entry(name).or_insert_with(Vec::new).extend(files);
    }
    mods
}

/// The identifiers that follow `crate::` in `code`, and the first segment
/// of each path inside `crate::{ … }` groups.
fn imported(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find("};").unwrap_or(group.len());
            // Top-level items of the group: split on commas outside braces.
            let mut depth = 0;
            let mut start = 0;
            let body = &group[..end];
            for (j, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(body[start..j].trim()));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            found.insert(ident(body[start..].trim()));
        } else {
            found.insert(ident(rest));
        }
    }
    found
}

fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(s: &mut State<'_>, v: &str) {
        s.index.insert(v.to_string(), s.next);
        s.low.insert(v.to_string(), s.next);
        s.next += 1;
        s.stack.push(v.to_string());
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn top_level_modules_import_each_other_in_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    assert!(mods.len() > 10, "found the core's modules: {mods:?}");
    let mut edges = BTreeMap::new();
    for (name, files) in &mods {
        let mut uses = BTreeSet::new();
        for f in files {
            let code = without_comments(&fs::read_to_string(f).expect("read module"));
            uses.extend(
                imported(&code)
                    .into_iter()
                    .filter(|m| m != name && mods.contains_key(m)),
            );
        }
        edges.insert(name.clone(), uses);
    }
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "top-level modules that import each other in a circle: {found:?}\nimports: {edges:#?}"
    );
}

#[test]
fn the_check_sees_a_circle() {
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    edges.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circles(&edges), vec![vec!["a", "b", "c"]]);
    assert_eq!(
        imported("use crate::{x::Y, z, w::{p, q}};\nlet _ = crate::v::f();"),
        BTreeSet::from(["v", "w", "x", "z"].map(String::from))
    );
}
