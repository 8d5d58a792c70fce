//! A CUDA source and the local headers it includes (`#include "..."` resolved
//! against the including file's folder, then the include folders; `#include <...>`
//! against the include folders only): what the macro checks parameter names
//! against, and what the build side watches where nvcc cannot be asked (nvcc's own
//! dependency list, when nvcc is there, is what the build hashes).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::guarded::read::MAX_SOURCE_BYTES;

/// The root source file first, then every local header it reaches, each once.
#[derive(Debug, Clone)]
pub struct SourceSet {
    pub files: Vec<SourceFile>,
}

#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

impl SourceSet {
    /// Reads `root` and, transitively, the local headers it includes. A header that
    /// is not found next to its includer is left to the compiler's include path.
    pub fn load(root: &Path) -> io::Result<Self> {
        Self::load_with(root, &[])
    }

    /// Like [`SourceSet::load`], searching `include_dirs` (nvcc's `-I` folders) as
    /// nvcc does: a quoted include next to its includer first, then each folder in
    /// order; an angled include in the folders only. Headers found nowhere (the
    /// toolkit's and the system's) are left out.
    pub fn load_with(root: &Path, include_dirs: &[PathBuf]) -> io::Result<Self> {
        let mut files: Vec<SourceFile> = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        let mut seen = BTreeSet::new();
        while let Some(path) = pending.pop() {
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            if !seen.insert(canonical) {
                continue;
            }
            let read = crate::guarded::read::read_to_string(&path, MAX_SOURCE_BYTES);
            let text = match read.map_err(std::io::Error::from) {
                Ok(text) => text,
                Err(error) if files.is_empty() => return Err(error),
                Err(_) => continue,
            };
            let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
            for (include, quoted) in includes(&text) {
                let beside = quoted.then(|| folder.join(include));
                let found = beside
                    .into_iter()
                    .chain(include_dirs.iter().map(|dir| dir.join(include)))
                    .find(|candidate| candidate.is_file());
                pending.extend(found);
            }
            files.push(SourceFile { path, text });
        }
        Ok(Self { files })
    }

    /// Where a file declares `ident` itself (a variable, a constant, a parameter of
    /// a function's declarator, a function, or a `#define` not guarded by
    /// `#ifndef`): the file, the line (from 1) and the line's text. A `-D` of that
    /// name would rewrite the declaration. Uses never count: inside expressions,
    /// calls' arguments, template arguments, array sizes, strings and comments.
    pub fn declaration_of(&self, ident: &str) -> Option<(&Path, usize, &str)> {
        self.files.iter().find_map(|file| {
            let guarded = file.text.lines().any(|line| guards_default(line, ident));
            let code = code_text(&file.text);
            declaration_at(&code, ident, guarded).map(|at| {
                let number = code[..at].matches('\n').count() + 1;
                let text = file.text.lines().nth(number - 1).unwrap_or("").trim();
                (file.path.as_path(), number, text)
            })
        })
    }

    /// Where a file gives `ident` a default that a `-D` replaces (`#ifndef ident`, or
    /// `#if !defined(ident)`): the file and the line (from 1). A parameter that
    /// reaches only the launch never replaces it.
    pub fn default_of(&self, ident: &str) -> Option<(&Path, usize)> {
        self.files.iter().find_map(|file| {
            code_lines(&file.text).find_map(|(number, code)| {
                guards_default(&code, ident).then_some((file.path.as_path(), number))
            })
        })
    }

    /// Whether `ident` occurs as an identifier outside comments in any file.
    pub fn mentions(&self, ident: &str) -> bool {
        self.files
            .iter()
            .any(|file| identifiers(&strip_comments(&file.text)).any(|word| word == ident))
    }
}

/// Whether `line` opens a default that a `-D` of `ident` replaces: `#ifndef ident`,
/// or `#if !defined(ident)`.
fn guards_default(line: &str, ident: &str) -> bool {
    let words: Vec<&str> = identifiers(line).collect();
    line.trim_start().starts_with('#')
        && (words.starts_with(&["ifndef", ident])
            || (words.first() == Some(&"if")
                && line.contains('!')
                && words.contains(&"defined")
                && words.contains(&ident)))
}

/// The paths of `#include "path"` (`true`) and `#include <path>` (`false`) lines.
fn includes(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        if let Some(rest) = rest.strip_prefix('"') {
            return rest.split_once('"').map(|(path, _)| (path, true));
        }
        let rest = rest.strip_prefix('<')?;
        rest.split_once('>').map(|(path, _)| (path, false))
    })
}

/// The whole file's code, line for line (the same line numbers), with comments
/// and the insides of literals blanked.
fn code_text(text: &str) -> String {
    let lines: Vec<String> = code_lines(text).map(|(_, code)| code).collect();
    lines.join("\n")
}

/// Each line's number (from 1) and its code, comments blanked.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    let mut in_block = false;
    text.lines().enumerate().map(move |(index, line)| {
        let mut code = String::new();
        let mut rest = line;
        loop {
            if in_block {
                match rest.find("*/") {
                    Some(end) => {
                        rest = &rest[end + 2..];
                        in_block = false;
                    }
                    None => break,
                }
            } else {
                let line_comment = rest.find("//");
                let block = rest.find("/*");
                match (line_comment, block) {
                    (Some(l), b) if b.is_none_or(|b| l < b) => {
                        code.push_str(&rest[..l]);
                        break;
                    }
                    (_, Some(b)) => {
                        code.push_str(&rest[..b]);
                        code.push(' ');
                        rest = &rest[b + 2..];
                        in_block = true;
                    }
                    _ => {
                        code.push_str(rest);
                        break;
                    }
                }
            }
        }
        (index + 1, blank_strings(&code))
    })
}

/// `code` with the insides of its string and character literals blanked.
fn blank_strings(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in code.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                    continue;
                }
                out.push(' ');
            }
            None => {
                if c == '"' || c == '\'' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Words before a name that make its statement a use, not a declaration.
const NOT_A_TYPE: [&str; 12] = [
    "return", "case", "sizeof", "if", "while", "for", "else", "goto", "throw", "new", "delete",
    "alignas",
];

/// Names before a `(` that open no parameter list: keywords, attributes and the
/// operators that look like calls.
const NOT_A_FUNCTION: [&str; 14] = [
    "if",
    "while",
    "for",
    "switch",
    "return",
    "sizeof",
    "alignof",
    "alignas",
    "decltype",
    "static_assert",
    "defined",
    "__launch_bounds__",
    "__cluster_dims__",
    "__align__",
];

/// Whether `code` (comments and literals blanked) declares `ident` anywhere.
#[cfg(test)]
fn declares(code: &str, ident: &str, guarded: bool) -> bool {
    declaration_at(code, ident, guarded).is_some()
}

/// Where `code` (comments and literals blanked, whole lines) first declares
/// `ident`: a byte offset. A declaration is
/// - `#define ident` (unless the file guards it with `#ifndef`), or
/// - `ident` right after a declaration's type, that is after nothing but words,
///   `*`, `&`, `::` and `<` (a template's parameter list only) since its statement,
///   template parameter or function parameter began (`const int N`, `T* N`,
///   `template <int N>`), ending in a word, `*` or `&`, and before `=`, `;`, `,`,
///   `(`, `)`, `[`, `{` or `>`. Where that start is a `(` or a `,` inside
///   parentheses, the parentheses must open a function's declarator (`void f(`,
///   after a type and a name) or a `for`'s first clause: inside a call's
///   arguments (`min(C, BLOCK * ITEMS)`) the same words are an expression.
fn declaration_at(code: &str, ident: &str, guarded: bool) -> Option<usize> {
    let mut offset = 0;
    let mut statements = String::with_capacity(code.len());
    for line in code.split_inclusive('\n') {
        if let Some(directive) = line.trim_start().strip_prefix('#') {
            let mut words = identifiers(directive);
            if words.next() == Some("define") && words.next() == Some(ident) && !guarded {
                return Some(offset);
            }
            // Directives are not statements: blanked, newline kept.
            statements.extend(line.chars().map(|c| if c == '\n' { c } else { ' ' }));
        } else {
            statements.push_str(line);
        }
        offset += line.len();
    }
    let code = statements.as_str();
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut search = 0;
    while let Some(found) = code[search..].find(ident) {
        let at = search + found;
        search = at + ident.len();
        let rest = &code[search..];
        let bounded = !code[..at].ends_with(is_word) && !rest.starts_with(is_word);
        let after = rest.trim_start();
        if !bounded
            || !after.starts_with(['=', ';', ',', '(', ')', '[', '{', '>'])
            || after.starts_with("==")
        {
            continue;
        }
        let start = code[..at].rfind([';', '{', '}', '(', ',']);
        let prefix = code[start.map_or(0, |i| i + 1)..at].trim();
        if declarator(prefix) && start.is_none_or(|i| opens_declarations(code, i)) {
            return Some(at);
        }
    }
    None
}

/// Whether `prefix` reads as a declaration's type: words, `*`, `&`, `::` (and `<`
/// in a template's parameter list), ending in a word, `*` or `&`; no keyword of a
/// statement, no word that starts with a digit (`16 * N` is arithmetic).
fn declarator(prefix: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let template = prefix.starts_with("template");
    !prefix.is_empty()
        && prefix.chars().all(|c| {
            is_word(c)
                || c.is_whitespace()
                || matches!(c, '*' | '&' | ':')
                || (c == '<' && template)
        })
        && prefix.ends_with(|c: char| is_word(c) || c == '*' || c == '&')
        && identifiers(prefix).next().is_some()
        && identifiers(prefix).all(|word| {
            !NOT_A_TYPE.contains(&word) && !word.starts_with(|c: char| c.is_ascii_digit())
        })
}

/// Whether the delimiter at `at` (`;`, `{`, `}`, `(` or `,`) begins a place where
/// declarations stand: a statement (`;`, `{`, `}`, or a `,` outside parentheses),
/// a function declarator's parameter, or a `for`'s first clause.
fn opens_declarations(code: &str, at: usize) -> bool {
    let open = match code.as_bytes()[at] {
        b'(' => Some(at),
        b',' => enclosing_paren(&code[..at]),
        _ => None,
    };
    let Some(open) = open else { return true };
    let before = code[..open].trim_end();
    let name_start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = &before[name_start..];
    if name == "for" {
        return code.as_bytes()[at] == b'(';
    }
    if name.is_empty()
        || name.starts_with(|c: char| c.is_ascii_digit())
        || NOT_A_FUNCTION.contains(&name)
    {
        return false;
    }
    // A declarator's name follows its type (a word, `*`, `&`, `>` of a template,
    // `)` of an attribute like `__launch_bounds__(256)`, or `::` of a qualified
    // name); a call's name follows an operator, `=`, `(`, `,` or a statement's start.
    let before_name = before[..name_start].trim_end();
    let ends_type = before_name.ends_with(|c: char| {
        c.is_ascii_alphanumeric() || c == '_' || matches!(c, '*' | '&' | '>' | ')' | ':')
    }) && !before_name.ends_with("->");
    let last_word = identifiers(before_name).last();
    ends_type
        && !(before_name.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && last_word.is_some_and(|word| NOT_A_TYPE.contains(&word)))
}

/// The offset of the `(` that encloses the end of `code`, if the nearest open
/// bracket is a parenthesis (not a brace, a bracket or nothing).
fn enclosing_paren(code: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, byte) in code.bytes().enumerate().rev() {
        match byte {
            b')' | b']' => depth += 1,
            b'(' | b'[' if depth > 0 => depth -= 1,
            b'(' => return Some(i),
            b'[' | b'{' | b'}' | b';' => return None,
            _ => {}
        }
    }
    None
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |end| &rest[l + end..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |end| &rest[b + 2 + end + 2..]);
                out.push(' ');
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_told_from_a_use() {
        for code in [
            "const int BLOCK_SIZE = 1024;",
            "  static constexpr unsigned BLOCK_SIZE{256};",
            "int *BLOCK_SIZE, n;",
            "__device__ float BLOCK_SIZE(int x) {",
            "template <int BLOCK_SIZE> __global__ void k() {",
            "void f(int BLOCK_SIZE) {",
            "#define BLOCK_SIZE 1024",
        ] {
            assert!(declares(code, "BLOCK_SIZE", false), "{code}");
        }
        for code in [
            "for (int i = 0; i < BLOCK_SIZE; ++i)",
            "static_assert(C % (16 * BLOCK_SIZE) == 0, \"a multiple of 16 * BLOCK_SIZE\");",
            "for (int i = tid; i < BM * BLOCK_SIZE; i += kThreads) {",
            "return BLOCK_SIZE;",
            "x = BLOCK_SIZE * 2;",
            "k<<<grid, BLOCK_SIZE>>>(x);",
            "foo<BLOCK_SIZE>(x);",
            "if (n == BLOCK_SIZE) {",
            "const unsigned chunk_start = blockIdx.x * BLOCK_SIZE;",
            "constexpr unsigned kChunk = BLOCK * BLOCK_SIZE;",
            "base = start + (warp + i * BLOCK_SIZE) * kWarpTile;",
            "for (int i = 0; i < BLOCK_SIZE; ++i)",
            "static_assert(C % (16 * BLOCK_SIZE) == 0, \"a multiple of 16 * BLOCK_SIZE\");",
            "for (int i = tid; i < BM * BLOCK_SIZE; i += kThreads) {",
            "int MY_BLOCK_SIZE = 1;",
            "#ifndef BLOCK_SIZE",
            // Everyday expressions that read like `T* NAME` without their context.
            "const int end = min(C, BLOCK * BLOCK_SIZE);",
            "const int end = min(C,\n    BLOCK * BLOCK_SIZE);",
            "y = f(x, ITEMS * BLOCK_SIZE, z);",
            "__shared__ float tile[ITEMS * BLOCK_SIZE];",
            "load<BLOCK_SIZE>(x);",
            "if (BLOCK * BLOCK_SIZE) {",
            "__global__ void __launch_bounds__(ITEMS * BLOCK_SIZE) k(float* x) {",
            "// BLOCK_SIZE, a comment",
        ] {
            assert!(!declares(&code_text(code), "BLOCK_SIZE", false), "{code}");
        }
        for code in [
            // Parameters of a function's declarator, on one line or several.
            "__global__ void k(const float* x,\n    int BLOCK_SIZE) {",
            "__device__ __forceinline__ void f(T* BLOCK_SIZE, int n);",
            "__global__ void __launch_bounds__(256) k(unsigned BLOCK_SIZE) {",
            "for (int BLOCK_SIZE = 0; BLOCK_SIZE < n; ++BLOCK_SIZE) {",
        ] {
            assert!(declares(&code_text(code), "BLOCK_SIZE", false), "{code}");
        }
        // The usual override: a default the -D replaces.
        assert!(!declares("#define BLOCK_SIZE 1024", "BLOCK_SIZE", true));
    }

    #[test]
    fn the_declaration_s_file_and_line_are_found_past_comments() {
        let dir = std::env::temp_dir().join(format!("autotune-spec-decl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("k.cu"),
            "#include \"k.cuh\"\n/* const int BLOCK = 1;\n   still a comment */\n__global__ void k() {}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("k.cuh"),
            "// header\n\nconst int BLOCK = 1024; // fixed\n",
        )
        .unwrap();
        let set = SourceSet::load(&dir.join("k.cu")).unwrap();
        let (path, line, text) = set.declaration_of("BLOCK").unwrap();
        assert!(path.ends_with("k.cuh"));
        assert_eq!((line, text), (3, "const int BLOCK = 1024; // fixed"));
        assert!(set.declaration_of("k").is_some(), "a function");
        assert!(set.declaration_of("THREADS").is_none());
        std::fs::write(
            dir.join("k.cuh"),
            "#ifndef BLOCK\n#define BLOCK 128\n#endif\n",
        )
        .unwrap();
        let set = SourceSet::load(&dir.join("k.cu")).unwrap();
        assert!(set.declaration_of("BLOCK").is_none(), "a guarded default");
    }

    #[test]
    fn follows_local_includes_and_ignores_comments() {
        let dir = std::env::temp_dir().join(format!("autotune-spec-src-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("inc")).unwrap();
        std::fs::write(
            dir.join("k.cu"),
            "#include \"inc/common.cuh\"\n#include <cuda_bf16.h>\n// STAGES here is a comment\n\
             __global__ void k() { int b = BLOCK; }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("inc/common.cuh"),
            "/* VEC */ #define TILE (BLOCK * 2)\n",
        )
        .unwrap();
        let set = SourceSet::load(&dir.join("k.cu")).unwrap();
        assert_eq!(set.files.len(), 2);
        assert!(set.mentions("BLOCK"));
        assert!(set.mentions("TILE"));
        assert!(!set.mentions("STAGES"));
        assert!(!set.mentions("VEC"));
        assert!(SourceSet::load(&dir.join("missing.cu")).is_err());
        // A header found through an include folder, as nvcc's `-I` finds it.
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/inner.cu"), "#include \"k.cu\"\n").unwrap();
        let alone = SourceSet::load(&dir.join("sub/inner.cu")).unwrap();
        assert_eq!(alone.files.len(), 1);
        let with_dir =
            SourceSet::load_with(&dir.join("sub/inner.cu"), std::slice::from_ref(&dir)).unwrap();
        assert_eq!(with_dir.files.len(), 3);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
