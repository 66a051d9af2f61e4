//! The library's top-level modules form layers: imports point one way, from higher modules to
//! lower ones, never around a cycle. Read from the source text (`crate::` paths outside test
//! code), so a new cycle fails here before anyone has to untangle it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without its `#[cfg(test)]` items (a test may use what it likes) and comments.
fn non_test_code(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test,") {
            // Skip the next item: up to its matching closing brace, or its `;`.
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The top-level modules named by `crate::` paths in `code`, `crate::{a, b::c}` groups too.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut refs = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Names at the group's own depth.
            let mut depth = 1;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 1 => {
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            refs.insert(name);
                        }
                        start = false;
                    }
                    _ => start = false,
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                refs.insert(name);
            }
        }
    }
    refs
}

/// The import graph between the library's top-level modules (the binary's `cli` excluded).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = crate::common::root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if ["lib", "main", "cli"].contains(&top.as_str())
            || f.file_name().is_some_and(|n| n == "tests.rs")
        {
            continue;
        }
        let code = non_test_code(&std::fs::read_to_string(&f).unwrap());
        let deps = graph.entry(top.clone()).or_default();
        for r in crate_refs(&code) {
            // `crate::Error`, `crate::CONTRACT_VERSION`: the root's own items.
            if r != top && !r.starts_with(|c: char| c.is_ascii_uppercase()) {
                deps.insert(r);
            }
        }
    }
    graph
}

/// A cycle through the graph, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| p == m).unwrap();
                    let mut c = path[from..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn the_detector_sees_paths_groups_and_cycles() {
    let refs = crate_refs(
        "use crate::io::Chunk;\nuse crate::{text::{words, Words}, hash};\nlet x = crate::ids::IdSet::default();\n// not_crate::x\n",
    );
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        ["hash", "ids", "io", "text"]
    );
    let code = non_test_code(
        "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nuse crate::c;\n",
    );
    assert_eq!(
        crate_refs(&code).into_iter().collect::<Vec<_>>(),
        ["a", "c"]
    );
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
}

/// The layer order docs/ARCHITECTURE.md states: the words of the code block after "From the
/// bottom up:", up to a parenthesised remark on each line.
fn stated_order() -> Vec<String> {
    let doc = std::fs::read_to_string(crate::common::root().join("docs/ARCHITECTURE.md")).unwrap();
    let at = doc
        .find("From the bottom up:")
        .expect("the layers' paragraph");
    let block = doc[at..]
        .split("```")
        .nth(1)
        .expect("the layers' code block");
    block
        .lines()
        .flat_map(|l| l.split('(').next().unwrap().split_whitespace())
        .map(String::from)
        .collect()
}

/// Every import points down the stated order; each module is in it (`synth` beside the
/// layers: it imports lower ones, and no module imports it).
#[test]
fn imports_point_down_the_order_the_architecture_states() {
    let order = stated_order();
    let pos = |m: &str| order.iter().position(|o| o == m);
    let g = module_graph();
    for (m, deps) in &g {
        if m == "guarded" {
            continue; // test-only
        }
        for d in deps {
            // `crate::named!` is the options module's macro.
            let d = if d == "named" { "options" } else { d.as_str() };
            assert_ne!(
                d, "synth",
                "{m} imports synth, which only tests and tools may"
            );
            let (pm, pd) = (pos(m), pos(d));
            assert!(pd.is_some(), "{d} is not in the stated order {order:?}");
            if m == "synth" {
                continue;
            }
            assert!(pm.is_some(), "{m} is not in the stated order {order:?}");
            assert!(
                pd < pm,
                "{m} imports {d}, which docs/ARCHITECTURE.md puts above it: {order:?}"
            );
        }
    }
    assert!(order.len() > 10 && pos("ops") > pos("engine"), "{order:?}");
}

/// The engines sign batches: records, fields and dedup policy (the JSONL and Parquet readers,
/// ids, exact keys, keep and group values) reach them only as tokenized batches, so nothing in
/// `engine/` names the modules that hold those.
#[test]
fn the_engine_sees_batches_not_records() {
    let g = module_graph();
    let engine = &g["engine"];
    for above in [
        "io", "jsonl", "corpus", "ids", "pipeline", "stages", "report", "ops",
    ] {
        assert!(
            !engine.contains(above),
            "engine/ imports crate::{above}: {engine:?}"
        );
    }
    assert!(engine.contains("batch"), "the graph was read: {engine:?}");
}

#[test]
fn the_top_level_modules_have_no_import_cycle() {
    let g = module_graph();
    if std::env::var_os("NEARDUP_SHOW_LAYERS").is_some() {
        for (m, deps) in &g {
            eprintln!(
                "{m} -> {}",
                deps.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    assert!(g.len() > 5, "the library's modules were read: {g:?}");
    if let Some(c) = find_cycle(&g) {
        panic!(
            "an import cycle between top-level modules: {}",
            c.join(" -> ")
        );
    }
}

/// The packages `package` builds with (normal and build dependencies, all features on), as
/// `cargo tree` lists them.
fn built_with(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "--all-features",
            "-e",
            "normal,build",
        ])
        .args(["--prefix", "none", "--format", "{p}", "-p", package])
        .current_dir(crate::common::root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_library_carries_no_command_line_dependency() {
    let lib = built_with("neardup");
    let cli = built_with("neardup-cli");
    // The listing works: the command line's own dependencies are seen through it.
    for front in ["clap", "indicatif", "ctrlc", "anyhow"] {
        assert!(
            cli.contains(front),
            "{front} is not a dependency of the command line"
        );
        assert!(
            !lib.contains(front),
            "the library depends on {front}, a command-line crate"
        );
    }
    assert!(lib.contains("rayon") && lib.contains("wgpu"), "{lib:?}");
}

/// The import graph between the files of `src/<dir>/` (`super::x` and `crate::<dir>::x`).
fn submodule_graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = crate::common::root().join("src").join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let names: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = f.file_stem().unwrap().to_string_lossy().into_owned();
        if me == "tests" || me == "mod" || f.parent() != Some(src.as_path()) {
            continue;
        }
        let code = non_test_code(&std::fs::read_to_string(f).unwrap())
            .replace("super::", "crate::")
            .replace(&format!("crate::{dir}::"), "crate::");
        let deps = graph.entry(me.clone()).or_default();
        for r in crate_refs(&code) {
            if r != me && names.contains(&r) {
                deps.insert(r);
            }
        }
    }
    graph
}

#[test]
fn the_files_of_io_have_no_import_cycle() {
    let g = submodule_graph("io");
    // The reader works: the inputs read chunks, and chunks decode.
    assert!(
        g["input"].contains("chunk") && g["chunk"].contains("decode"),
        "{g:?}"
    );
    if let Some(c) = find_cycle(&g) {
        panic!("an import cycle between files of io/: {}", c.join(" -> "));
    }
}

/// The paths `code` names after `prefix` (`prefix::a::b`, `prefix::{a::b, c}`), each as its
/// module path segments (`["a", "b"]`).
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let segments = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        // Part of a longer path (`not_super::`, `dedup::cluster::`): not this one.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut from) = (1, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        out.push(segments(&group[from..i]));
                        from = i + 1;
                        if c == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push(segments(&rest[..end]));
        }
    }
    out
}

/// The files of the sharded stages (`src/stages/sharded/`, a stage's folder as `rank/job`),
/// each a stage or what stages share, import each other without a cycle: a stage's parallel
/// form sits above its one-process form, what both forms share (the folder's `mod.rs`) below
/// them, and what two stages share below both. Paths read: `super::` and
/// `crate::stages::sharded::`.
#[test]
fn the_sharded_stages_files_import_each_other_without_a_cycle() {
    let dir = crate::common::root().join("src/stages/sharded");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    // `rank/mod.rs` is the node `rank`, `rank/job.rs` the node `rank/job`.
    let node = |p: &Path| -> String {
        let rel = p.strip_prefix(&dir).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        parts.join("/")
    };
    let nodes: BTreeSet<String> = files.iter().map(|f| node(f)).collect();
    // A path from `scope` to the deepest node it names (an item of a folder's `mod.rs`: the
    // folder).
    let resolve = |scope: &str, segs: &[String]| -> Option<String> {
        let mut found = None;
        let mut at = scope.to_string();
        for s in segs {
            at = if at.is_empty() {
                s.clone()
            } else {
                format!("{at}/{s}")
            };
            if nodes.contains(&at) {
                found = Some(at.clone());
            } else {
                break;
            }
        }
        found.or_else(|| (!scope.is_empty()).then(|| scope.to_string()))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = node(f);
        if me.is_empty() {
            continue; // the stages' own mod.rs
        }
        let parent = me.rsplit_once('/').map_or("", |(p, _)| p).to_string();
        let code = non_test_code(&std::fs::read_to_string(f).unwrap());
        let mut named = Vec::new();
        for segs in paths_after(&code, "crate::stages::sharded::") {
            named.extend(resolve("", &segs));
        }
        for segs in paths_after(&code, "super::") {
            named.extend(resolve(&parent, &segs));
        }
        // A folder's own files, named from its mod.rs (`job::rank`).
        for child in nodes
            .iter()
            .filter(|n| n.rsplit_once('/').is_some_and(|(p, _)| p == me))
        {
            let name = child.rsplit('/').next().unwrap();
            if !paths_after(&code, &format!("{name}::")).is_empty() {
                named.push(child.clone());
            }
        }
        // A folder imported by its name (`use super::rank;`) and named through it after
        // (`rank::tasks::split`).
        for folder in named.clone() {
            let name = folder.rsplit('/').next().unwrap().to_string();
            for segs in paths_after(&code, &format!("{name}::")) {
                named.extend(resolve(&folder, &segs));
            }
        }
        let deps = graph.entry(me.clone()).or_default();
        deps.extend(named.into_iter().filter(|n| *n != me));
    }
    assert!(
        graph["task"].contains("rank/tasks")
            && graph["rank/tasks"].contains("rank")
            && graph["rank/job"].contains("rank")
            && graph["cluster/job"].contains("cluster"),
        "{graph:#?}"
    );
    for stage in ["rank", "cluster"] {
        let shared = &graph[stage];
        assert!(
            !shared.contains(&format!("{stage}/job"))
                && !shared.contains(&format!("{stage}/tasks")),
            "{stage}/mod.rs imports one of the forms it sits below: {shared:?}"
        );
    }
    assert_eq!(find_cycle(&graph), None, "{graph:#?}");
}

#[test]
fn paths_are_read_in_groups_and_alone() {
    let p = paths_after(
        "use super::{a::b, c, d::{e, f}};\nlet x = super::g::h(1);\nnot_super::z; x::super::y",
        "super::",
    );
    let want: Vec<Vec<&str>> = vec![vec!["a", "b"], vec!["c"], vec!["d"], vec!["g", "h"]];
    assert_eq!(p, want);
}
