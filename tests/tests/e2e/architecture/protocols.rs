//! A new meter protocol must be a compile error wherever it needs handling: no match over
//! [`Protocol`] anywhere in the workspace (daemon/, collectors/, tests/) has a wildcard arm,
//! and what cannot be a compile error, the docs' meter tables, is checked here too.
//!
//! Why a scan of the sources and not `clippy::wildcard_enum_match_arm`: that lint only
//! guards the modules that deny it, so a new file (the new protocol's codec, a daemon
//! module, a test) that matches with `_ =>` is not caught, and denied more widely it refuses
//! the wildcard arms of every other enum too. Nor does it see most of the ways this code
//! base had of missing a protocol: clippy 1.95 flags `_ =>` and `other =>` arms of a match
//! on the enum itself, but not a wildcard in a tuple's
//! place (`(Some(enc), _) =>` in the simulator's old stream encoder), in a variant's
//! (`Some(_) =>` beside `Some(Protocol::Line) =>`), the one `matches!` hides
//! (`matches!(p, Protocol::Pzem004t | Protocol::Pzem017)` is false for a new PZEM), or an
//! `if let`. The scan reads every `.rs` file and refuses, where a pattern names
//! `Protocol::`:
//!
//! - an unguarded `_`, binding (`other =>`) or `..` arm in a match, or one in a place of a
//!   tuple or a variant where another arm names a protocol (`(None, _) =>` beside
//!   `(None, Protocol::Line) =>`, `Some(_) =>` beside `Some(Protocol::Line) =>`); deeper
//!   nesting and struct patterns are not looked into;
//! - `matches!` and refutable `let` (`if let`, `let … else`), which hide a wildcard;
//! - what would let a pattern name a variant without `Protocol::` and so escape the scan:
//!   `use` of its variants, and `Self::Variant` inside an `impl … Protocol` block.
//!
//! Asking "is it this protocol?" with `==` stays allowed: it names one protocol on purpose
//! (`protocol == Protocol::Line` needs a line format).

use std::path::{Path, PathBuf};

use wattson_collectors::meter::Protocol;

use super::{rust_files, workspace};

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments and string and char literals blanked to spaces (line breaks
/// kept, so offsets keep their lines).
fn code_only(source: &str) -> Vec<char> {
    let s: Vec<char> = source.chars().collect();
    let mut out = s.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(s.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut i = 0;
    while i < s.len() {
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        match s[i] {
            '/' if s.get(i + 1) == Some(&'/') => {
                let end = (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len());
                blank(&mut out, i, end);
                i = end;
            }
            '/' if s.get(i + 1) == Some(&'*') => {
                let (mut depth, mut j) = (0, i);
                while j < s.len() {
                    if s[j] == '/' && s.get(j + 1) == Some(&'*') {
                        depth += 1;
                        j += 2;
                    } else if s[j] == '*' && s.get(j + 1) == Some(&'/') {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            'r' if !prev_ident || (s[i - 1] == 'b' && (i < 2 || !is_ident(s[i - 2]))) => {
                let hashes = s[i + 1..].iter().take_while(|&&c| c == '#').count();
                if s.get(i + 1 + hashes) != Some(&'"') {
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let end = (start..s.len())
                    .find(|&j| s[j] == '"' && s[j + 1..].iter().take(hashes).all(|&c| c == '#'))
                    .map_or(s.len(), |j| j + 1 + hashes);
                blank(&mut out, i + 1, end);
                i = end;
            }
            '"' => {
                let mut j = i + 1;
                while j < s.len() && s[j] != '"' {
                    j += if s[j] == '\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            '\'' => {
                // A char literal, or a lifetime (left as it is).
                let end = if s.get(i + 1) == Some(&'\\') {
                    (i + 3..s.len().min(i + 12)).find(|&j| s[j] == '\'')
                } else {
                    (s.get(i + 2) == Some(&'\'')).then_some(i + 2)
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i, end + 1);
                        i = end + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The index of the bracket that closes the one at `open`.
fn closing(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split at `sep` outside brackets, each piece trimmed.
fn split_top(text: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if c == sep && depth == 0 {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out.iter().map(|p| p.trim().to_owned()).collect()
}

/// Where the keyword `word` stands in `code` (not inside a longer identifier).
fn keyword_at(code: &[char], word: &str) -> Vec<usize> {
    let w: Vec<char> = word.chars().collect();
    (0..code.len().saturating_sub(w.len() - 1))
        .filter(|&i| {
            code[i..i + w.len()] == w[..]
                && (i == 0 || !is_ident(code[i - 1]))
                && code.get(i + w.len()).is_none_or(|&c| !is_ident(c))
        })
        .collect()
}

/// Whether a pattern names a variant as `Protocol::Variant`.
fn names_protocol(pattern: &str) -> bool {
    pattern
        .match_indices("Protocol::")
        .any(|(i, _)| !pattern[..i].ends_with(is_ident))
}

/// Whether a pattern matches anything: `_`, `..`, a binding (`other`, `ref mut p`), `p @ _`.
fn catch_all(pattern: &str) -> bool {
    let p = pattern.trim();
    if let Some((_, after)) = p.split_once(" @ ") {
        return catch_all(after);
    }
    let name = p.trim_start_matches("ref ").trim_start_matches("mut ");
    p == "_"
        || p == ".."
        || (name.starts_with(|c: char| c.is_lowercase() || c == '_')
            && name.chars().all(is_ident)
            && !matches!(name, "true" | "false"))
}

/// The patterns of the arms of a match whose body (inside its braces) is `body`: each with
/// whether it has a guard, the guard cut off.
fn arms(body: &[char]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while body.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
            i += 1;
        }
        let start = i;
        let mut depth = 0i32;
        let arrow = loop {
            match body.get(i) {
                None => return out,
                Some('(' | '[' | '{') => depth += 1,
                Some(')' | ']' | '}') => depth -= 1,
                Some('=') if depth == 0 && body.get(i + 1) == Some(&'>') => break i,
                Some(_) => {}
            }
            i += 1;
        };
        let pattern: String = body[start..arrow].iter().collect();
        let guard = keyword_at(&body[start..arrow], "if").first().copied();
        match guard {
            Some(g) => out.push((body[start..start + g].iter().collect(), true)),
            None => out.push((pattern, false)),
        }
        i = arrow + 2;
        while body.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if body.get(i) == Some(&'{') {
            i = closing(body, i).map_or(body.len(), |j| j + 1);
        } else {
            let mut depth = 0i32;
            while let Some(&c) = body.get(i) {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth -= 1,
                    ',' if depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
        }
    }
}

/// A tuple or tuple-variant pattern as its constructor (`""` for a tuple, `Some`, `Ok`) and
/// its elements; `None` for any other pattern.
fn parts(pattern: &str) -> Option<(String, Vec<String>)> {
    let p = pattern.trim();
    let open = p.find('(')?;
    let ctor = p[..open].trim();
    if !ctor.chars().all(|c| is_ident(c) || c == ':') {
        return None;
    }
    let chars: Vec<char> = p.chars().collect();
    let open_at = p[..open].chars().count();
    if closing(&chars, open_at)? != chars.len() - 1 {
        return None;
    }
    let elements = split_top(&p[open + 1..p.len() - 1], ',');
    (!ctor.is_empty() || elements.len() > 1).then(|| (ctor.to_owned(), elements))
}

/// Why a match whose arms are `arms` may miss a new protocol, if it is over `Protocol` and
/// may: a catch-all arm, or one catching all in a place (of a tuple, or of a variant such as
/// `Some(..)`) where another arm names a protocol.
fn wildcard_arm(arms: &[(String, bool)]) -> Option<String> {
    let alternatives = |pattern: &str| -> Vec<String> {
        split_top(pattern, '|')
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect()
    };
    if !arms.iter().any(|(p, _)| names_protocol(p)) {
        return None;
    }
    let places: Vec<(String, usize)> = arms
        .iter()
        .flat_map(|(p, _)| alternatives(p))
        .filter_map(|a| parts(&a))
        .flat_map(|(ctor, elements)| {
            (0..elements.len())
                .filter(|&i| names_protocol(&elements[i]))
                .map(|i| (ctor.clone(), i))
                .collect::<Vec<_>>()
        })
        .collect();
    for (pattern, _) in arms.iter().filter(|(_, guarded)| !guarded) {
        for a in alternatives(pattern) {
            let wild = catch_all(&a)
                || parts(&a).is_some_and(|(ctor, elements)| {
                    places.iter().filter(|(c, _)| *c == ctor).any(|&(_, i)| {
                        elements.iter().any(|e| e == "..")
                            || elements.get(i).is_some_and(|e| catch_all(e))
                    })
                });
            if wild {
                return Some(format!("wildcard arm `{}`", a.trim()));
            }
        }
    }
    None
}

/// Every place in `source` where a match or pattern over `Protocol` could miss a new
/// protocol: (line, what).
fn protocol_wildcards(source: &str) -> Vec<(usize, String)> {
    let code = code_only(source);
    let line = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let text = |from: usize, to: usize| -> String { code[from..to].iter().collect() };
    let mut out = Vec::new();
    for at in keyword_at(&code, "match") {
        // The body opens at the first brace outside brackets after the scrutinee.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &c) in code.iter().enumerate().skip(at + 5) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let Some(close) = closing(&code, open) else {
            continue;
        };
        if let Some(why) = wildcard_arm(&arms(&code[open + 1..close])) {
            out.push((line(at), why));
        }
    }
    for at in keyword_at(&code, "matches") {
        let Some(open) = (at + 7..code.len()).find(|&j| !code[j].is_whitespace()) else {
            continue;
        };
        if code[open] != '!' {
            continue;
        }
        let Some(paren) = (open + 1..code.len()).find(|&j| !code[j].is_whitespace()) else {
            continue;
        };
        let Some(close) = closing(&code, paren) else {
            continue;
        };
        let args = split_top(&text(paren + 1, close), ',');
        if args.len() > 1 && names_protocol(&args[1..].join(",")) {
            out.push((line(at), "`matches!` over a protocol".to_owned()));
        }
    }
    for at in keyword_at(&code, "let") {
        // The pattern runs to the `=` that is not `==`, `=>`, `<=`, `>=` or `!=`.
        let end = (at + 3..code.len()).find(|&j| {
            code[j] == '='
                && !matches!(code.get(j + 1), Some('=' | '>'))
                && !matches!(code[j - 1], '=' | '<' | '>' | '!')
                || code[j] == ';'
        });
        if let Some(end) = end
            && names_protocol(&text(at + 3, end))
        {
            out.push((line(at), "a refutable `let` over a protocol".to_owned()));
        }
    }
    for at in keyword_at(&code, "use") {
        let end = (at..code.len())
            .find(|&j| code[j] == ';')
            .unwrap_or(code.len());
        if text(at, end).contains("Protocol::") {
            out.push((line(at), "`use` of Protocol's variants".to_owned()));
        }
    }
    for at in keyword_at(&code, "impl") {
        let Some(open) = (at..code.len()).find(|&j| code[j] == '{' || code[j] == ';') else {
            continue;
        };
        let header = text(at + 4, open);
        let for_protocol = header.trim() == "Protocol"
            || header.trim_end().ends_with(" for Protocol")
            || header.trim_end().ends_with(" for meter::Protocol");
        let Some(close) = closing(&code, open).filter(|_| for_protocol) else {
            continue;
        };
        let body = text(open, close);
        let variant = Protocol::ALL.iter().any(|p| {
            let name = format!("Self::{p:?}");
            body.match_indices(&name)
                .any(|(i, _)| !body[i + name.len()..].starts_with(is_ident))
        });
        if variant {
            out.push((
                line(at),
                "`Self::Variant` in an impl of Protocol".to_owned(),
            ));
        }
    }
    out.sort();
    out
}

/// Every `.rs` file of daemon/, collectors/ and tests/, build outputs left out.
fn workspace_sources() -> Vec<PathBuf> {
    let root = workspace();
    ["daemon", "collectors", "tests"]
        .iter()
        .flat_map(|dir| rust_files(&root.join(dir)))
        .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
        .collect()
}

/// Regression: the meter session ended its poll match with `_ => self.poll_sdm(i)`, so a
/// new polled protocol compiled and was read as an Eastron SDM.
#[test]
fn no_match_over_protocol_has_a_wildcard_arm() {
    let root = workspace();
    let files = workspace_sources();
    assert!(
        files.iter().any(|p| p.ends_with("meter/protocol.rs")),
        "the scan did not reach the meter code"
    );
    let mut found = Vec::new();
    for path in &files {
        let source = std::fs::read_to_string(path).expect("reading a source file");
        for (line, what) in protocol_wildcards(&source) {
            let rel = path.strip_prefix(&root).unwrap_or(path);
            found.push(format!("{}:{line}: {what}", rel.display()));
        }
    }
    assert!(
        found.is_empty(),
        "a new meter protocol would not be a compile error here: name every protocol \
         (Protocol::A | Protocol::B => ...) instead of a wildcard:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_protocol_scanner_sees_what_it_must() {
    let caught = |src: &str| protocol_wildcards(src).len();
    for src in [
        "fn f(p: Protocol) -> u8 { match p { Protocol::Line => 1, _ => 2 } }",
        "fn f(p: Protocol) -> u8 { match p { Protocol::Line => { 1 } other => g(other) } }",
        "fn f(p: Protocol) -> u8 { match p {\n Protocol::A | Protocol::B => 1,\n p @ _ => 2,\n} }",
        "fn f() { match (x, p) { (Some(e), _) => 1, (None, Protocol::WattsUp) => 2, _ => 3 } }",
        "fn f() { match (x, p) { (None, Protocol::A) => 1, (Some(_), ..) => 2 } }",
        "fn f(p: Protocol) -> bool { !matches!(p, Protocol::Pzem017 | Protocol::Line) }",
        "fn f(p: Protocol) { if let Protocol::Line = p { g() } }",
        "fn f(p: Protocol) { let Protocol::Line = p else { return }; }",
        "use wattson_collectors::meter::Protocol::*;",
        "impl Protocol { fn f(self) -> u8 { match self { Self::Line => 1, Self::WattsUp => 2 } } }",
        // Nested: the inner match is over a protocol.
        "fn f() { match x { Some(p) => match p { Protocol::A => 1, _ => 2 }, None => 0 } }",
        "fn f() { match found { Some(Protocol::A) => 1, Some(_) => 2, None => 3 } }",
        "fn f() { match r { Ok(Protocol::A) => 1, Ok(p) => 2, Err(e) => 3 } }",
        "fn f() { let c = '\\''; match p { Protocol::A => 1, _ => 2 } }",
    ] {
        assert_eq!(caught(src), 1, "{src}");
    }
    for src in [
        "fn f(p: Protocol) -> u8 { match p { Protocol::A | Protocol::B => 1, Protocol::C => 2 } }",
        "fn f() { match x { Some(l) if p == Protocol::Line => 1, Some(_) => 2, None => 3 } }",
        "fn f() { match (x, p) { (Some(_), Protocol::A) => 1, (None, Protocol::A) => 2 } }",
        "fn f() { match p { Protocol::A => g(|a, b| a + b), Protocol::B => 2 } }",
        "fn f(p: Protocol) -> bool { p == Protocol::Line && matches!(x, Some(_)) }",
        "fn f() { let x = \"match p { Protocol::A => 1, _ => 2 }\"; } // _ => Protocol::A",
        "fn f() { match c { '{' => 1, _ => 2 } }",
        "impl FromStr for Protocol { type Err = E; fn f() -> Result<Self, Self::Err> { g() } }",
        "fn f() { match found { Some(Protocol::A) => 1, Some(Protocol::B) => 2, None => 3 } }",
        "fn f() { match r { Ok(Protocol::A) => 1, Ok(Protocol::B) => 2, Err(e) => 3 } }",
        "fn f(s: &str) -> usize { s.matches('x').count() }",
        "fn f() { let p = Protocol::Line; let ok = p >= Protocol::A; }",
    ] {
        assert_eq!(protocol_wildcards(src), Vec::new(), "{src}");
    }
}

/// The config names in the first cell of each row of the table under the `header` line.
fn table_names(readme: &str, header: &str) -> Vec<String> {
    let mut names: Vec<String> = readme
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names
}

/// The docs' meter table (docs/meters.md) and accuracy table (docs/reports.md) and the config
/// example's comment (docs/configuration.md) are written by hand: each must name every
/// protocol.
#[test]
fn the_docs_name_every_protocol() {
    let read = |name: &str| {
        std::fs::read_to_string(Path::new(&workspace()).join(name))
            .unwrap_or_else(|e| panic!("reading {name}: {e}"))
    };
    let mut all: Vec<String> = Protocol::ALL.map(|p| p.as_str().to_owned()).to_vec();
    all.sort();
    for (file, header) in [
        ("docs/meters.md", "| protocol | meters |"),
        ("docs/reports.md", "| protocol | stated accuracy used |"),
    ] {
        assert_eq!(
            table_names(&read(file), header),
            all,
            "{file} table `{header}`"
        );
    }
    let example = read("docs/configuration.md")
        .lines()
        .find(|l| l.starts_with("protocol = ") && l.contains('#'))
        .and_then(|l| l.split_once('#'))
        .map(|(_, comment)| {
            comment
                .split('|')
                .map(|n| n.trim().to_owned())
                .collect::<Vec<_>>()
        });
    let mut example = example.expect("the config example's protocol line lists the protocols");
    example.sort();
    assert_eq!(
        example, all,
        "docs/configuration.md config example, `protocol = ...  # ...`"
    );
}
