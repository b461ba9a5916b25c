//! Parser for nats-server's configuration file format.
//!
//! Follows the behaviour of nats-server's `conf/lex.go` and `conf/parse.go`
//! (no code is shared). The format:
//!
//! * `key: value`, `key = value` and `key value`; keys may be quoted
//!   (`"a b": 1`); a value ends at a new line, `;` or `,`;
//! * maps `{ ... }` (also as `key { ... }`), arrays `[a, b]` (`,` or new
//!   lines between elements); the whole file may be wrapped in `{ }`;
//! * comments `# ...` and `// ...` to the end of the line;
//! * strings: double-quoted with escapes `\t \n \r \" \\ \xHH`, single-quoted
//!   (raw), bare (`listen: localhost:4222`, `token: 3secret`), and
//!   `( ... )` blocks ending at a `)` alone on a line;
//! * integers with size suffixes (case-insensitive, as parse.go): `k` = 1000,
//!   `kb`/`ki`/`kib` = 1024; likewise `m`, `g`, `t`, `p`, `e` (powers of
//!   1000) and `mb`, `gib`, ... (powers of 1024); floats `1.5`;
//! * booleans `true/false/yes/no/on/off` (bare, case-insensitive);
//! * `include path` (quoted or bare; relative to the including file), whose
//!   keys are merged into the current map;
//! * variables: a bare `$NAME` takes the value of the key `NAME` defined
//!   earlier in an enclosing map, else of the environment variable `NAME`
//!   (itself parsed as a config value).
//!
//! Values that are bare tokens keep their source text ([`Item::raw`]) so
//! that callers can reinterpret them: `2m` lexes as the integer 2000000 as in
//! nats-server, but a duration field can read it as two minutes.
//!
//! Deliberate leniencies relative to nats-server (it reports a syntax error
//! instead): a bare token that starts like a number but is not one (`1.5s`,
//! `2024-01-01`, `1-2`) is a string; `[1, 2]` gives two integers (nats-server
//! lexes an integer followed directly by `]` as a string); keys end at `{`/`[`.
//!
//! Errors carry the file, line and column as nats-server prints them:
//! `foo.conf:7:3: unknown field "tsl"`. An entry of a map is located at its
//! key, as in nats-server (an array element at itself); the column is
//! 1-based and counts bytes, as nats-server's lexer does (which, on the
//! first line of a file only, counts from 0).
//!
//! Bounds (nats-server has none of these; a config is trusted, but must not
//! crash the server or exhaust its memory whatever it holds): maps and arrays
//! nest at most [`MAX_NESTING`] deep, includes (and environment variables
//! that refer to further variables) [`MAX_DEPTH`] deep; one parse reads at
//! most [`MAX_INCLUDES`] include files and [`MAX_TEXT_BYTES`] of text (files,
//! environment variables and the text a `$VARIABLE` copies, together) and
//! builds at most [`MAX_VALUES`] values (a `$VARIABLE` counts the values it
//! copies); an include must name a regular file.
//!
//! The parser is a nom grammar (complete parsers over `&str`); its rules,
//! each a function below:
//!
//! ```text
//! document      := blank ('{' body blank EOF | body)
//! body          := (blank entry entry_end)* blank ('}' | EOF)
//! entry         := 'include' &[ \t] include | key separator value
//! include       := [ \t]* include_path
//! key           := raw_quoted | bare_key
//! separator     := whitespace* ([:=] [ \t]*)?
//! entry_end     := line_rest (new_line | ';' | ',' | EOF | &'}')
//! value         := array | map | raw_string | quoted_string | block | number | bare
//! array         := '[' (blank value element_end)* blank ']'
//! element_end   := line_rest (',' | new_line | &']')
//! map           := '{' body
//! raw_string    := "'" (any but "'")* "'"
//! quoted_string := '"' text('"') '"'
//! block         := '(' (any but block_end)* block_end
//! number        := ('-' | digit) (any but bare_end)*
//! bare          := text(bare_end)
//! text(stop)    := (escape | any but '\' or stop)*
//! blank         := (whitespace | comment)*
//! line_rest     := [ \t]* comment?
//! comment       := ('#' | '//') (any but new_line)*
//! ```
//!
//! A rule that does not apply returns `nom::Err::Error`, so that `alt` tries
//! the next; a mistake is a committed `nom::Err::Failure` with a message and
//! the place in the text, turned into a line number when parsing stops.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use nom::branch::alt;
use nom::bytes::complete::{tag, take, take_till, take_while, take_while1};
use nom::character::complete::{anychar, char, digit1, one_of, satisfy, space0};
use nom::combinator::{all_consuming, consumed, eof, not, opt, peek, recognize, rest, value};
use nom::error::{ErrorKind, ParseError};
use nom::multi::{fold_many0, many0_count};
use nom::sequence::{delimited, preceded, terminated};
use nom::{IResult, Parser as _};

/// Maximum nesting of `include`s (and of environment variables that refer to
/// further variables) before parsing gives up.
pub const MAX_DEPTH: usize = 16;

/// Maximum nesting of maps and arrays (across includes and variables too);
/// deeper is an error (`maps and arrays nested more than 64 deep`). Bounds the
/// parser's recursion.
pub const MAX_NESTING: usize = 64;

/// Maximum number of include files one parse reads (a file included twice
/// counts twice).
pub const MAX_INCLUDES: usize = 4096;

/// Maximum text one parse reads: the config file, its includes, the
/// environment variables it refers to and the strings and keys copied by its
/// `$VARIABLE`s, together: 32 MiB.
pub const MAX_TEXT_BYTES: usize = 32 << 20;

/// Maximum number of values one parse builds, the copies made for
/// `$VARIABLE`s included: 2 Mi.
pub const MAX_VALUES: usize = 2 << 20;

/// A parse (or later, value) error in a config file, with its location.
///
/// Displays as nats-server's config errors do, `FILE:LINE:COLUMN: MESSAGE`
/// (`server.conf:2:3: unknown field "tsl"`), or `config file FILE: MESSAGE`
/// when no place applies (e.g. the file cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    /// The file as named by the user or an `include` (or `<string>`, or
    /// `environment variable NAME`).
    pub file: String,
    /// 1-based line number, if the error is at a place in the file.
    pub line: Option<usize>,
    /// 1-based column in bytes (see [`Item::column`]), with the line.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl ConfError {
    /// An error about `item`, located at its file, line and column (for an
    /// entry of a map, its key's).
    pub fn at(item: &Item, message: impl Into<String>) -> Self {
        ConfError {
            file: item.origin.to_string(),
            line: Some(item.line),
            column: Some(item.column),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.message)
            }
            (Some(line), None) => write!(f, "{}:{line}: {}", self.file, self.message),
            _ => write!(f, "config file {}: {}", self.file, self.message),
        }
    }
}

/// The error for a key that the block it is in does not have, in
/// nats-server's words: `FILE:LINE:COLUMN: unknown field "KEY"`. `None` when
/// the key is only a variable (a later `$KEY` referred to it), which
/// nats-server accepts anywhere.
pub fn unknown_field(key: &str, item: &Item) -> Option<ConfError> {
    (!item.used_as_variable).then(|| ConfError::at(item, format!("unknown field {key:?}")))
}

impl std::error::Error for ConfError {}

/// One or more [`ConfError`]s of one config, in file order; displays one a
/// line (as nats-server lists a config's errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfErrors(pub Vec<ConfError>);

impl From<ConfError> for ConfErrors {
    fn from(e: ConfError) -> Self {
        ConfErrors(vec![e])
    }
}

impl fmt::Display for ConfErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfErrors {}

/// A config value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Quoted, block or bare string (also ISO 8601 datetimes and IP:port).
    String(String),
    /// Integer, size suffix already applied (`64MB` = 67108864).
    Integer(i64),
    /// Floating point number (`0.5`).
    Float(f64),
    /// `true/false/yes/no/on/off`.
    Bool(bool),
    /// `[ ... ]`.
    Array(Vec<Item>),
    /// `{ ... }`.
    Map(Map),
}

impl Value {
    /// Short type name for error messages: `string`, `integer`, `float`,
    /// `boolean`, `array`, `map`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Integer(_) => "integer",
            Value::Float(_) => "float",
            Value::Bool(_) => "boolean",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }
}

/// A value with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The value.
    pub value: Value,
    /// 1-based line of the value's first character; for an entry of a map,
    /// of its key's (as nats-server locates it).
    pub line: usize,
    /// 1-based column of that character on [`Self::line`], in bytes (a tab
    /// counts one, `é` two), as nats-server's lexer counts; a quoted key's
    /// column is its first character's, after the quote.
    pub column: usize,
    /// File the value is in (see [`ConfError::file`]).
    pub origin: Arc<str>,
    /// Source text of an unquoted scalar (`2m`, `64MB`, `true`), `None` for
    /// quoted strings, blocks, arrays, maps and variable references.
    pub raw: Option<String>,
    /// Whether a later `$NAME` referred to this key (such keys are not
    /// reported as unknown).
    pub used_as_variable: bool,
}

impl Item {
    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// The integer, if this is an integer.
    pub fn as_int(&self) -> Option<i64> {
        match self.value {
            Value::Integer(i) => Some(i),
            _ => None,
        }
    }
    /// The boolean, if this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.value {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
    /// The map, if this is a map.
    pub fn as_map(&self) -> Option<&Map> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
}

/// An ordered map of keys to items. Keys are kept as written (callers
/// compare case-insensitively where nats-server does); setting a key again
/// replaces its value in place, as nats-server's last-wins map does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Map {
    entries: Vec<(String, Item)>,
}

impl Map {
    /// The item for exactly `key`.
    pub fn get(&self, key: &str) -> Option<&Item> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Item> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Sets `key`, replacing an earlier value (keeping its position).
    pub fn insert(&mut self, key: String, item: Item) {
        match self.get_mut(&key) {
            Some(slot) => *slot = item,
            None => self.entries.push((key, item)),
        }
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Item)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Parses the config file at `path` (includes are relative to its directory).
///
/// Errors: the file cannot be read, a syntax error (with its place), or a
/// bound of the module doc is passed.
pub fn parse_file(path: &Path) -> Result<Map, ConfError> {
    parse_file_at(path, Context::root(), false)
}

/// Parses config text; includes are relative to the current directory and
/// errors name the file `<string>`.
pub fn parse_str(input: &str) -> Result<Map, ConfError> {
    let origin: Arc<str> = Arc::from("<string>");
    let ctx = Context::root();
    if !ctx.budget.bytes.take(input.len()) {
        return Err(ConfError {
            file: origin.to_string(),
            line: None,
            column: None,
            message: too_much_text(),
        });
    }
    Grammar::new(input, origin, PathBuf::from("."), ctx).parse()
}

fn too_much_text() -> String {
    format!(
        "more than {} MiB of config text (files, includes, environment variables and the copies made by variables together)",
        MAX_TEXT_BYTES >> 20
    )
}

/// What one parse may still use (see the module doc's bounds), shared by the
/// files it includes and the variables it reads.
#[derive(Debug)]
struct Budget {
    bytes: Allowance,
    includes: Allowance,
    values: Allowance,
}

/// How much of one bound is left.
#[derive(Debug)]
struct Allowance(Cell<usize>);

impl Allowance {
    /// Takes `n`; false (taking nothing) when less than `n` is left.
    fn take(&self, n: usize) -> bool {
        match self.0.get().checked_sub(n) {
            Some(left) => {
                self.0.set(left);
                true
            }
            None => false,
        }
    }

    fn left(&self) -> usize {
        self.0.get()
    }
}

/// What a parse inherits from the one that started it (through an include
/// or an environment variable).
#[derive(Debug, Clone)]
struct Context {
    /// Include / variable nesting depth.
    depth: usize,
    /// Maps and arrays open around the text (an include inside a map).
    nesting: usize,
    /// Canonical paths of the files being parsed (for include cycles).
    chain: Vec<PathBuf>,
    /// The parse's bounds.
    budget: Rc<Budget>,
}

impl Context {
    fn root() -> Context {
        Context {
            depth: 0,
            nesting: 0,
            chain: Vec::new(),
            budget: Rc::new(Budget {
                bytes: Allowance(Cell::new(MAX_TEXT_BYTES)),
                includes: Allowance(Cell::new(MAX_INCLUDES)),
                values: Allowance(Cell::new(MAX_VALUES)),
            }),
        }
    }
}

/// Reads and parses the file at `path` within `ctx` (its depth is the
/// file's). An include (`included`) must be a regular file.
fn parse_file_at(path: &Path, mut ctx: Context, included: bool) -> Result<Map, ConfError> {
    let origin: Arc<str> = Arc::from(path.display().to_string());
    let err = |message: String| ConfError {
        file: origin.to_string(),
        line: None,
        column: None,
        message,
    };
    if ctx.depth > MAX_DEPTH {
        return Err(err(format!("includes nested more than {MAX_DEPTH} deep")));
    }
    if included && !ctx.budget.includes.take(1) {
        return Err(err(format!(
            "more than {MAX_INCLUDES} include files in one config"
        )));
    }
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if ctx.chain.contains(&canonical) {
        return Err(err("include cycle: the file includes itself".into()));
    }
    let text = read_text(path, included, &ctx.budget.bytes).map_err(err)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    ctx.chain.push(canonical);
    Grammar::new(&text, origin.clone(), dir, ctx).parse()
}

/// The text of the file at `path`, taken from `bytes` (at most what is left
/// of it is read). An include must be a regular file (not a device or pipe).
fn read_text(path: &Path, included: bool, bytes: &Allowance) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    if included {
        let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
        if !meta.is_file() {
            return Err("cannot read: not a regular file".into());
        }
    }
    let mut raw = Vec::new();
    let limit = u64::try_from(bytes.left()).unwrap_or(u64::MAX);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read: {e}"))?;
    if !bytes.take(raw.len()) {
        return Err(too_much_text());
    }
    String::from_utf8(raw).map_err(|e| {
        format!(
            "cannot read: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The digest of a parsed config as nats-server prints it for `-t` and logs
/// it with `Using configuration file`: `sha256:` and the hexadecimal SHA-256
/// of the map encoded as Go's `encoding/json` encodes it (keys sorted, `<`,
/// `>`, `&` escaped, a new line at the end). The same file gives the same
/// digest on both servers.
pub fn digest(map: &Map) -> String {
    use sha2::Digest as _;
    let mut json = String::new();
    go_json_map(map, &mut json);
    json.push('\n');
    let hash = sha2::Sha256::digest(json.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn go_json_map(map: &Map, out: &mut String) {
    let mut entries: Vec<(&str, &Item)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(k, out);
        out.push(':');
        go_json_value(v, out);
    }
    out.push('}');
}

fn go_json_value(item: &Item, out: &mut String) {
    use std::fmt::Write as _;
    match &item.value {
        Value::String(s) => go_json_string(s, out),
        Value::Integer(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(f) => go_json_float(*f, out),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_value(v, out);
            }
            out.push(']');
        }
        Value::Map(m) => go_json_map(m, out),
    }
}

/// A float as Go's encoder writes it: shortest digits, plain from 1e-6 up to
/// 1e21, else with an exponent (`1e+21`, `1e-7`).
fn go_json_float(f: f64, out: &mut String) {
    use std::fmt::Write as _;
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exp}");
            }
            _ => out.push_str(&text),
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

/// A string as Go's encoder writes it (with HTML escaping, its default).
fn go_json_string(s: &str, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses a size: an integer with an optional nats-server suffix (see the
/// module doc): `1000`, `-1`, `1k` (1000), `64MB` (64 MiB), `1GiB`.
/// Returns `None` if malformed or out of `i64` range.
pub fn parse_size(s: &str) -> Option<i64> {
    let s = s.trim();
    let digits_end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(s.len(), |(i, _)| i);
    let num: i64 = s[..digits_end].parse().ok()?;
    let mult = size_multiplier(&s[digits_end..])?;
    num.checked_mul(mult)
}

/// Multiplier for a size suffix as in nats-server's parse.go.
fn size_multiplier(suffix: &str) -> Option<i64> {
    let suffix = suffix.trim().to_ascii_lowercase();
    let (letter, rest) = match suffix.chars().next() {
        None => return Some(1),
        Some(c) => (c, &suffix[c.len_utf8()..]),
    };
    let power = match letter {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        't' => 4,
        'p' => 5,
        'e' => 6,
        _ => return None,
    };
    let base: i64 = match rest {
        "" => 1000,
        "b" | "i" | "ib" => 1024,
        _ => return None,
    };
    base.checked_pow(power)
}

/// Parses a config file's duration string: a Go duration
/// ([`jsproto::duration::parse_go_duration`]: `"0"`, or a sequence of decimal
/// numbers, each with optional fraction and a unit `ns`, `us` (`µs`), `ms`,
/// `s`, `m`, `h`: `100ms`, `1.5h`, `1h30m`, `+5s`) that is not negative.
///
/// The config file's own rules on top of Go's grammar: a leading `-` is
/// refused (even `-0s`), so are negative values and overflow (`None`). A
/// bare integer taken as seconds is the caller's rule
/// (`options::expect_duration`), not this function's: `"5"` is `None` here.
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s.starts_with('-') {
        return None;
    }
    let nanos = jsproto::duration::parse_go_duration(s)?;
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

// ---------------------------------------------------------------------------
// The grammar (see the module doc for its rules).
//
// Purely lexical rules are free functions; rules that build items, and so
// need the origin, the scopes of variables and the include chain, are
// methods of `Grammar`.
// ---------------------------------------------------------------------------

/// Why the grammar stopped: the error type of its nom parsers.
#[derive(Debug)]
enum Fault {
    /// A mistake in the text being parsed, found where `remaining` bytes of
    /// it were left (the line number is derived from that).
    At { remaining: usize, message: String },
    /// An error already located elsewhere: in an included file or in an
    /// environment variable's value.
    Located(ConfError),
}

impl ParseError<&str> for Fault {
    /// nom's own errors mean "this rule does not apply"; the grammar turns
    /// every real mistake into a [`fail`] with a message, so this text only
    /// shows if a rule forgets to.
    fn from_error_kind(input: &str, kind: ErrorKind) -> Self {
        Fault::At {
            remaining: input.len(),
            message: format!("syntax error ({})", kind.description()),
        }
    }

    fn append(_: &str, _: ErrorKind, other: Self) -> Self {
        other
    }
}

/// What a rule returns: the rest of the input and its output, or a [`Fault`].
type Res<'s, T> = IResult<&'s str, T, Fault>;

/// A committed failure (no alternative is tried) located at `at`.
fn fail<'s, T>(at: &'s str, message: impl Into<String>) -> Res<'s, T> {
    Err(nom::Err::Failure(Fault::At {
        remaining: at.len(),
        message: message.into(),
    }))
}

/// The next character, to choose between rules or name it in a message.
fn next_char(i: &str) -> Option<char> {
    i.chars().next()
}

/// `new_line := '\n' | '\r'`
fn is_nl(c: char) -> bool {
    c == '\n' || c == '\r'
}

/// `bare_end := new_line | ' ' | '\t' | ',' | ';' | '}' | ']'`: what ends an
/// unquoted value, as in lex.go's lexString.
fn ends_bare(c: char) -> bool {
    is_nl(c) || matches!(c, ' ' | '\t' | ',' | ';' | '}' | ']')
}

/// `comment := ('#' | '//') (any but new_line)*` — as lex.go's
/// lexCommentStart, a comment runs to the end of the line.
fn comment(i: &str) -> Res<'_, &str> {
    recognize((alt((tag("#"), tag("//"))), take_till(is_nl))).parse(i)
}

/// `blank := (whitespace | comment)*`: what may come between entries and
/// array elements, new lines included.
fn blank(i: &str) -> Res<'_, ()> {
    let whitespace = take_while1(|c: char| c.is_whitespace());
    value((), many0_count(alt((whitespace, comment)))).parse(i)
}

/// `line_rest := [ \t]* comment?`: the rest of the line after a value.
fn line_rest(i: &str) -> Res<'_, ()> {
    value((), (space0, opt(comment))).parse(i)
}

/// `c`, or else a failure at `at` (where the unclosed construct began).
fn closed_by<'s>(
    c: char,
    at: &'s str,
    message: &'static str,
) -> impl FnMut(&'s str) -> Res<'s, char> {
    move |i| char::<_, Fault>(c).parse(i).or_else(|_| fail(at, message))
}

/// `raw_quoted := q (any but q)* q` for a quote `q` in `quotes`, without
/// escapes (quoted keys, include paths, single-quoted strings). Fails with
/// `unterminated` at the opening quote if the quote is not closed.
fn raw_quoted<'s>(
    quotes: &'static str,
    unterminated: &'static str,
) -> impl FnMut(&'s str) -> Res<'s, &'s str> {
    move |start| {
        let (i, q) = one_of(quotes).parse(start)?;
        terminated(
            take_till(move |c| c == q),
            closed_by(q, start, unterminated),
        )
        .parse(i)
    }
}

/// `key := raw_quoted | bare_key`, and whether it was quoted;
/// `bare_key := (any but whitespace, '=', ':', '{', '[')*` — as lex.go's
/// lexKey, a key ends at whitespace or a separator (here also at a `{` or
/// `[` that starts its value).
fn key(i: &str) -> Res<'_, (&str, bool)> {
    let bare_key = take_till(|c: char| c.is_whitespace() || matches!(c, '=' | ':' | '{' | '['));
    alt((
        raw_quoted("\"'", "unterminated quoted key").map(|k| (k, true)),
        bare_key.map(|k| (k, false)),
    ))
    .parse(i)
}

/// `separator := whitespace* ([:=] [ \t]*)?` — `key: v`, `key = v` and
/// `key v` (lex.go's lexKeyEnd); the value, or a map's `{`, may follow on a
/// later line when there is no `:` or `=`.
fn separator(i: &str) -> Res<'_, ()> {
    let whitespace = take_while(|c: char| c.is_whitespace());
    value((), (whitespace, opt((one_of(":="), space0)))).parse(i)
}

/// `include_path := raw_quoted | (any but whitespace, ';', '}')*`
fn include_path(i: &str) -> Res<'_, &str> {
    match next_char(i) {
        Some(c @ ('[' | '{' | '(')) => fail(i, format!("expected an include path, found {c:?}")),
        None => fail(i, "expected an include path, found end of file"),
        Some(c) if is_nl(c) => fail(i, "expected an include path, found a new line"),
        Some(_) => alt((
            raw_quoted("\"'", "unterminated quoted include path"),
            take_till(|c: char| c.is_whitespace() || matches!(c, ';' | '}')),
        ))
        .parse(i),
    }
}

/// `entry_end := line_rest (new_line | ';' | ',' | EOF | &'}')`: what
/// follows an entry (the `}` only inside a map, where it is left for the map
/// to close).
fn entry_end<'s>(i: &'s str, key: &str, in_map: bool) -> Res<'s, ()> {
    let (i, ()) = line_rest(i)?;
    match next_char(i) {
        None => Ok((i, ())),
        Some('\n' | '\r' | ';' | ',') => Ok((&i[1..], ())),
        Some('}') if in_map => Ok((i, ())),
        Some(c) => fail(
            i,
            format!("unexpected {c:?} after the value of {key:?}; expected a new line, ';' or ','"),
        ),
    }
}

const UNCLOSED_ARRAY: &str = "unterminated array: no closing ']'";

/// `element_end := line_rest (',' | new_line | &']')`: what follows an array
/// element (the `]` is left for the array to close). `open` is the `[`.
fn element_end<'s>(i: &'s str, open: &'s str) -> Res<'s, ()> {
    let (i, ()) = line_rest(i)?;
    match next_char(i) {
        Some(',' | '\n' | '\r') => Ok((&i[1..], ())),
        Some(']') => Ok((i, ())),
        None => fail(open, UNCLOSED_ARRAY),
        Some(c) => fail(i, format!("unexpected {c:?} in array; expected ',' or ']'")),
    }
}

/// A piece of string text: a character, or a byte written `\xHH`.
#[derive(Debug, Clone, Copy)]
enum Piece {
    Char(char),
    Byte(u8),
}

/// `escape := '\' ('t' | 'n' | 'r' | '"' | '\' | 'x' hex_byte)` — the
/// escapes of lex.go's lexStringEscape.
fn escape(i: &str) -> Res<'_, Piece> {
    const ALLOWED: &str = "allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\";
    let (i, _) = char('\\').parse(i)?;
    let Ok((after, c)) = anychar::<_, Fault>(i) else {
        return fail(i, format!("invalid escape at end of file; {ALLOWED}"));
    };
    let c = match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        '"' => '"',
        '\\' => '\\',
        'x' => return hex_byte(after),
        _ => return fail(after, format!("invalid escape '\\{c}'; {ALLOWED}")),
    };
    Ok((after, Piece::Char(c)))
}

/// `hex_byte := any any`, read as a hexadecimal byte: `\x41` is `A`; bytes
/// of a UTF-8 sequence make its character (`\xc3\xa9` is `é`), as Go's
/// strings hold bytes.
fn hex_byte(i: &str) -> Res<'_, Piece> {
    let (after, hex) = alt((take(2usize), rest)).parse(i)?;
    match u8::from_str_radix(hex, 16) {
        Ok(b) if hex.len() == 2 => Ok((after, Piece::Byte(b))),
        _ => fail(
            after,
            format!("expected two hexadecimal digits after '\\x', got {hex:?}"),
        ),
    }
}

/// `text(stop) := (escape | any but '\' or stop)*`: string text with escapes
/// decoded, up to (not including) a character for which `stop` holds. Bytes
/// that are not UTF-8 (`\xff`) become U+FFFD, as nats-server shows them in
/// JSON.
fn text<'s>(stop: fn(char) -> bool) -> impl FnMut(&'s str) -> Res<'s, String> {
    move |i| {
        let plain = satisfy(move |c| c != '\\' && !stop(c)).map(Piece::Char);
        let push = |mut bytes: Vec<u8>, piece| {
            match piece {
                Piece::Char(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                Piece::Byte(b) => bytes.push(b),
            }
            bytes
        };
        fold_many0(alt((plain, escape)), Vec::new, push)
            .map(|bytes| match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => lossy(e.as_bytes()),
            })
            .parse(i)
    }
}

/// `bytes` as text, each byte that is not part of a UTF-8 character replaced
/// by U+FFFD (as Go's JSON encoder does).
fn lossy(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                out.push_str(std::str::from_utf8(&bytes[..valid]).unwrap_or_default());
                let bad = e.error_len().unwrap_or(bytes.len() - valid);
                out.extend(std::iter::repeat_n('\u{fffd}', bad));
                bytes = &bytes[valid + bad..];
            }
        }
    }
}

/// `block_end := '\n' ')' &(EOF | new_line)`: a `)` alone on a line.
fn block_end(i: &str) -> Res<'_, ()> {
    let line_end = alt((eof, tag("\n"), tag("\r")));
    value((), (char('\n'), char(')'), peek(line_end))).parse(i)
}

/// What a token that starts like a number is (parse.go's rules, with the
/// leniencies in the module doc):
/// `integer := '-'? digit+ size_suffix?` (see [`parse_size`]),
/// `float := '-'? digit+ '.' digit+`, anything else a string (`127.0.0.1:4222`,
/// `2024-01-02T03:04:05Z`, `1h30m`, `3secret`). Errs with a message.
fn number_value(tok: &str) -> Result<Value, String> {
    let int: Res<'_, &str> = recognize((opt(char('-')), digit1)).parse(tok);
    let Ok((suffix, int)) = int else {
        let unsigned = tok.strip_prefix('-').unwrap_or(tok);
        return Err(if unsigned.starts_with('.') {
            "floats must start with a digit".to_string()
        } else {
            format!("expected a digit after '-', found {tok:?}")
        });
    };
    if let Some(mult) = size_multiplier(suffix) {
        return int
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(mult))
            .map(Value::Integer)
            .ok_or_else(|| format!("integer {tok:?} is out of range"));
    }
    let fraction: Res<'_, _> = all_consuming((char('.'), digit1)).parse(suffix);
    if fraction.is_ok() {
        return match tok.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Value::Float(f)),
            _ => Err(format!("float {tok:?} is out of range")),
        };
    }
    Ok(Value::String(tok.to_string()))
}

/// The grammar's state while parsing one text.
struct Grammar<'s> {
    /// The text (without a byte order mark).
    src: &'s str,
    /// Byte offsets of the `\n`s in `src`, to turn positions into lines.
    newlines: Vec<usize>,
    /// File the text is from (see [`ConfError::file`]).
    origin: Arc<str>,
    /// Directory that `include` paths are relative to.
    dir: PathBuf,
    /// Depth, include chain and bounds inherited from the parse that
    /// started this one.
    ctx: Context,
    /// Maps and arrays open at the current place (from `ctx.nesting`).
    nesting: Cell<usize>,
    /// Maps being built, outermost first, for `$VAR` look-ups. A `RefCell`
    /// because the rules borrow the grammar shared (several closures of one
    /// `alt` refer to it).
    scopes: RefCell<Vec<Map>>,
}

/// One level of map or array nesting, given back when dropped.
struct Nested<'g>(&'g Cell<usize>);

impl Drop for Nested<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// The weight of `item`: how many values it holds (itself included), how
/// deep its maps and arrays nest (0 for a scalar) and how many bytes of text
/// its strings and keys hold.
fn weight(item: &Item) -> Weight {
    let children: Box<dyn Iterator<Item = (usize, &Item)>> = match &item.value {
        Value::Array(items) => Box::new(items.iter().map(|v| (0, v))),
        Value::Map(map) => Box::new(map.entries.iter().map(|(k, v)| (k.len(), v))),
        Value::String(s) => {
            return Weight {
                values: 1,
                depth: 0,
                bytes: s.len(),
            }
        }
        _ => {
            return Weight {
                values: 1,
                depth: 0,
                bytes: 0,
            }
        }
    };
    let start = Weight {
        values: 1,
        depth: 1,
        bytes: 0,
    };
    children.fold(start, |total, (key, child)| {
        let w = weight(child);
        Weight {
            values: total.values.saturating_add(w.values),
            depth: total.depth.max(w.depth + 1),
            bytes: total.bytes.saturating_add(key).saturating_add(w.bytes),
        }
    })
}

/// See [`weight`].
struct Weight {
    values: usize,
    depth: usize,
    bytes: usize,
}

impl<'s> Grammar<'s> {
    fn new(src: &'s str, origin: Arc<str>, dir: PathBuf, ctx: Context) -> Self {
        let src = src.strip_prefix('\u{feff}').unwrap_or(src);
        Grammar {
            src,
            newlines: src.match_indices('\n').map(|(at, _)| at).collect(),
            origin,
            dir,
            nesting: Cell::new(ctx.nesting),
            ctx,
            scopes: RefCell::new(vec![Map::default()]),
        }
    }

    /// Parses the whole text into a map.
    fn parse(self) -> Result<Map, ConfError> {
        match self.document(self.src) {
            Ok(_) => Ok(self.scopes.into_inner().pop().unwrap_or_default()),
            Err(nom::Err::Error(fault) | nom::Err::Failure(fault)) => Err(self.locate(fault)),
            Err(nom::Err::Incomplete(_)) => Err(self.locate(Fault::At {
                remaining: 0,
                message: "unexpected end of file".into(),
            })),
        }
    }

    /// 1-based line and column (in bytes) of the position where `remaining`
    /// bytes of the text are left.
    fn position(&self, remaining: usize) -> (usize, usize) {
        let offset = self.src.len().saturating_sub(remaining);
        let newlines_before = self.newlines.partition_point(|&nl| nl < offset);
        let line_start = match newlines_before {
            0 => 0,
            n => self.newlines[n - 1] + 1,
        };
        (1 + newlines_before, 1 + offset - line_start)
    }

    /// 1-based line of `at`, a suffix of the text.
    fn line_of(&self, at: &str) -> usize {
        self.position(at.len()).0
    }

    fn locate(&self, fault: Fault) -> ConfError {
        match fault {
            Fault::At { remaining, message } => {
                let (line, column) = self.position(remaining);
                ConfError {
                    file: self.origin.to_string(),
                    line: Some(line),
                    column: Some(column),
                    message,
                }
            }
            Fault::Located(e) => e,
        }
    }

    /// An item whose value starts at `at`.
    fn item(&self, value: Value, at: &str, raw: Option<String>) -> Item {
        let (line, column) = self.position(at.len());
        Item {
            value,
            line,
            column,
            origin: self.origin.clone(),
            raw,
            used_as_variable: false,
        }
    }

    /// Opens a map or array at `open`: one more level of nesting, until the
    /// returned guard is dropped; a failure past [`MAX_NESTING`].
    fn nest(&self, open: &'s str) -> Result<Nested<'_>, nom::Err<Fault>> {
        let level = self.nesting.get() + 1;
        if level > MAX_NESTING {
            return Err(nom::Err::Failure(Fault::At {
                remaining: open.len(),
                message: format!("maps and arrays nested more than {MAX_NESTING} deep"),
            }));
        }
        self.nesting.set(level);
        Ok(Nested(&self.nesting))
    }

    /// Counts `n` more values against [`MAX_VALUES`]; a failure at `at` past
    /// it.
    fn count_values(&self, n: usize, at: &'s str) -> Result<(), nom::Err<Fault>> {
        if self.ctx.budget.values.take(n) {
            return Ok(());
        }
        Err(nom::Err::Failure(Fault::At {
            remaining: at.len(),
            message: format!(
                "more than {MAX_VALUES} values in one config (copies made by variables included)"
            ),
        }))
    }

    /// A context for a parse started here (an include or a variable).
    fn child(&self) -> Context {
        Context {
            depth: self.ctx.depth + 1,
            nesting: self.nesting.get(),
            chain: self.ctx.chain.clone(),
            budget: Rc::clone(&self.ctx.budget),
        }
    }

    /// Sets `key` in the innermost map being built.
    fn define(&self, key: String, item: Item) {
        let mut scopes = self.scopes.borrow_mut();
        if scopes.is_empty() {
            scopes.push(Map::default());
        }
        if let Some(scope) = scopes.last_mut() {
            scope.insert(key, item);
        }
    }

    /// `document := blank '{' body blank EOF | body` — the whole file may be
    /// wrapped in braces, as a JSON file is.
    fn document(&self, i: &'s str) -> Res<'s, ()> {
        let (i, ()) = blank(i)?;
        alt((|i| self.braced_document(i), |i| self.body(i, None))).parse(i)
    }

    /// The `'{' body blank EOF` branch of `document`.
    fn braced_document(&self, open: &'s str) -> Res<'s, ()> {
        let (i, _) = char('{').parse(open)?;
        let (i, ()) = self.body(i, Some(open))?;
        let (i, ()) = blank(i)?;
        match next_char(i) {
            None => Ok((i, ())),
            Some(c) => fail(i, format!("unexpected {c:?} after the closing '}}'")),
        }
    }

    /// `body := (blank entry entry_end)* blank close`: the entries of a map
    /// into the innermost scope. `open` is the map's `{`, and `close` its
    /// `}`; at the top level (`open` is `None`) `close` is the end of the
    /// text.
    fn body(&self, mut i: &'s str, open: Option<&'s str>) -> Res<'s, ()> {
        loop {
            (i, ()) = blank(i)?;
            match (next_char(i), open) {
                (None, None) => return Ok((i, ())),
                (None, Some(open)) => {
                    let line = self.line_of(open);
                    return fail(
                        i,
                        format!("unexpected end of file: the map opened on line {line} has no closing '}}'"),
                    );
                }
                (Some('}'), Some(_)) => return Ok((&i[1..], ())),
                (Some(c @ ('=' | ':')), _) => {
                    return fail(i, format!("unexpected key separator {c:?}"))
                }
                (Some(c @ ('}' | ']' | ',' | ';')), _) => {
                    return fail(i, format!("unexpected {c:?}, expected a key"))
                }
                (Some(_), _) => {}
            }
            let key;
            (i, key) = self.entry(i)?;
            (i, ()) = entry_end(i, key, open.is_some())?;
        }
    }

    /// `entry := 'include' &[ \t] include | key separator value`: one entry
    /// into the innermost scope. An unquoted key `include` (any case)
    /// followed by a space or tab starts an include, as lex.go's
    /// keyCheckKeyword decides. Returns the key, for messages.
    fn entry(&self, at: &'s str) -> Res<'s, &'s str> {
        let (i, (key, quoted)) = key(at)?;
        let space: Res<'_, char> = peek(one_of(" \t")).parse(i);
        if !quoted && key.eq_ignore_ascii_case("include") && space.is_ok() {
            let (i, ()) = self.include(i)?;
            return Ok((i, key));
        }
        let (i, ()) = separator(i)?;
        let (i, mut item) = self.entry_value(i, at, key)?;
        // Located at the key, as nats-server does (a quoted key at its first
        // character inside the quotes).
        let key_at = if quoted { &at[1..] } else { at };
        (item.line, item.column) = self.position(key_at.len());
        self.define(key.to_string(), item);
        Ok((i, key))
    }

    /// The value after `key` (at `key_at`) and its separator, which must
    /// start on the separator's line (lex.go's lexValue rejects a new line
    /// or comment there).
    fn entry_value(&self, i: &'s str, key_at: &'s str, key: &str) -> Res<'s, Item> {
        match next_char(i) {
            None => fail(key_at, format!("key {key:?} has no value")),
            Some(c) if is_nl(c) => fail(
                i,
                format!("expected a value for key {key:?}, found a new line"),
            ),
            Some(_) if comment(i).is_ok() => fail(
                i,
                format!("expected a value for key {key:?}, found a comment"),
            ),
            Some(_) => self.value(i),
        }
    }

    /// `include := [ \t]* include_path`: parses the file (relative to this
    /// one's directory) and merges its keys into the innermost scope, as
    /// parse.go's processItem does for an include.
    fn include(&self, at: &'s str) -> Res<'s, ()> {
        let (i, path) = preceded(space0, include_path).parse(at)?;
        let included = parse_file_at(&self.dir.join(path), self.child(), true).map_err(|e| {
            nom::Err::Failure(match e.line {
                // Cannot read the file: report it at the include line.
                None => Fault::At {
                    remaining: at.len(),
                    message: format!("include {path:?}: {}", e.message),
                },
                Some(_) => Fault::Located(e),
            })
        })?;
        for (k, v) in included.entries {
            self.define(k, v);
        }
        Ok((i, ()))
    }

    /// `value := array | map | raw_string | quoted_string | block | number |
    /// bare`, chosen by the first character as lex.go's lexValue does.
    fn value(&self, at: &'s str) -> Res<'s, Item> {
        let (i, item) = alt((
            |i| self.array(i),
            |i| self.map(i),
            |i| self.raw_string(i),
            |i| self.quoted_string(i),
            |i| self.block(i),
            |i| self.number(i),
            |i| self.bare(i),
        ))
        .parse(at)?;
        self.count_values(1, at)?;
        Ok((i, item))
    }

    /// `array := '[' (blank value element_end)* blank ']'` — elements are
    /// separated by `,` or new lines (lex.go's lexArrayValue).
    fn array(&self, open: &'s str) -> Res<'s, Item> {
        let (mut i, _) = char('[').parse(open)?;
        let _nested = self.nest(open)?;
        let mut items = Vec::new();
        loop {
            (i, ()) = blank(i)?;
            match next_char(i) {
                None => return fail(open, UNCLOSED_ARRAY),
                Some(']') => {
                    return Ok((&i[1..], self.item(Value::Array(items), open, None)));
                }
                Some(',') => return fail(i, "unexpected ',' in array"),
                Some(_) => {}
            }
            let item;
            (i, item) = self.value(i)?;
            items.push(item);
            (i, ()) = element_end(i, open)?;
        }
    }

    /// `map := '{' body '}'`; its keys are a new scope for variables.
    fn map(&self, open: &'s str) -> Res<'s, Item> {
        let (i, _) = char('{').parse(open)?;
        let _nested = self.nest(open)?;
        self.scopes.borrow_mut().push(Map::default());
        let body = self.body(i, Some(open));
        let map = self.scopes.borrow_mut().pop().unwrap_or_default();
        let (i, ()) = body?;
        Ok((i, self.item(Value::Map(map), open, None)))
    }

    /// `raw_string := "'" (any but "'")* "'"`: no escapes.
    fn raw_string(&self, at: &'s str) -> Res<'s, Item> {
        let (i, s) = raw_quoted("'", "unterminated single-quoted string").parse(at)?;
        Ok((i, self.item(Value::String(s.to_string()), at, None)))
    }

    /// `quoted_string := '"' text('"') '"'`, which may span lines.
    fn quoted_string(&self, at: &'s str) -> Res<'s, Item> {
        let close = closed_by('"', at, "unterminated double-quoted string");
        let (i, s) = delimited(char('"'), text(|c| c == '"'), close).parse(at)?;
        Ok((i, self.item(Value::String(s), at, None)))
    }

    /// `block := '(' (any but block_end)* block_end` — lex.go's lexBlock: the
    /// text after `(` up to the new line before a `)` alone on a line.
    fn block(&self, at: &'s str) -> Res<'s, Item> {
        let body = recognize(many0_count((not(block_end), anychar)));
        let unclosed = "unterminated block: no ')' alone on a line";
        let end = |i| block_end(i).or_else(|_| fail(at, unclosed));
        let (i, s) = delimited(char('('), body, end).parse(at)?;
        Ok((i, self.item(Value::String(s.to_string()), at, None)))
    }

    /// `number := ('-' | digit) (any but bare_end)*`, classified by
    /// [`number_value`]; `'.' digit` is an error, as in lex.go (floats must
    /// start with a digit).
    fn number(&self, at: &'s str) -> Res<'s, Item> {
        let leading_dot: Res<'_, _> = (char('.'), satisfy(|c| c.is_ascii_digit())).parse(at);
        if leading_dot.is_ok() {
            return fail(at, "floats must start with a digit");
        }
        let start = peek(satisfy(|c| c.is_ascii_digit() || c == '-'));
        let (i, tok) = preceded(start, take_till(ends_bare)).parse(at)?;
        match number_value(tok) {
            Ok(v) => Ok((i, self.item(v, at, Some(tok.to_string())))),
            Err(message) => fail(at, message),
        }
    }

    /// `bare := text(bare_end)` (not empty), read as lex.go's lexString
    /// does: with escapes, a string; else a boolean
    /// (`true/false/yes/no/on/off`, any case); else, if it starts with `$`,
    /// a variable — except a bcrypt hash `$2a$...` (parse.go's
    /// lookupVariable); else a string.
    fn bare(&self, at: &'s str) -> Res<'s, Item> {
        let (i, (raw, s)) = consumed(text(ends_bare)).parse(at)?;
        if s.is_empty() {
            let found = next_char(i).map_or("end of file".to_string(), |c| format!("{c:?}"));
            return fail(i, format!("expected a value, found {found}"));
        }
        let item = |v| self.item(v, at, Some(raw.to_string()));
        if raw.contains('\\') {
            return Ok((i, item(Value::String(s))));
        }
        match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => return Ok((i, item(Value::Bool(true)))),
            "false" | "no" | "off" => return Ok((i, item(Value::Bool(false)))),
            _ => {}
        }
        match s.strip_prefix('$') {
            Some(name) if !name.starts_with("2a$") => Ok((i, self.variable(name, at)?)),
            _ => Ok((i, item(Value::String(s)))),
        }
    }

    /// `$NAME` (at `at`): the value of the key `NAME` set earlier in this or
    /// an enclosing map, else the environment variable `NAME` parsed as a
    /// config value (parse.go's lookupVariable).
    fn variable(&self, name: &str, at: &'s str) -> Result<Item, nom::Err<Fault>> {
        let fault = |message: String| {
            nom::Err::Failure(Fault::At {
                remaining: at.len(),
                message,
            })
        };
        let relocate = |mut item: Item| {
            item.used_as_variable = false;
            (item.line, item.column) = self.position(at.len());
            item.origin = self.origin.clone();
            item.raw = None;
            item
        };
        let mut scopes = self.scopes.borrow_mut();
        let defined = scopes
            .iter_mut()
            .rev()
            .find_map(|scope| scope.get_mut(name));
        if let Some(found) = defined {
            found.used_as_variable = true;
            // The copy counts against the bounds: a variable of variables
            // must not grow the config (or its nesting) without end.
            // Its text counts too: copies of one long string must not
            // exhaust memory before the count of values would stop them.
            let w = weight(found);
            if self.nesting.get() + w.depth > MAX_NESTING {
                return Err(fault(format!(
                    "maps and arrays nested more than {MAX_NESTING} deep (through '${name}')"
                )));
            }
            self.count_values(w.values.saturating_sub(1), at)?;
            if !self.ctx.budget.bytes.take(w.bytes) {
                return Err(fault(too_much_text()));
            }
            return Ok(relocate(found.clone()));
        }
        drop(scopes);
        let Ok(env) = std::env::var(name) else {
            return Err(fault(format!(
                "variable reference for '${name}' can not be found"
            )));
        };
        if self.ctx.depth >= MAX_DEPTH {
            return Err(fault(format!("variable '${name}' nests too deeply")));
        }
        if !self.ctx.budget.bytes.take(env.len()) {
            return Err(fault(too_much_text()));
        }
        let text = format!("pk={env}");
        let origin: Arc<str> = Arc::from(format!("environment variable {name}"));
        let map = Grammar::new(&text, origin, self.dir.clone(), self.child())
            .parse()
            .map_err(|e| nom::Err::Failure(Fault::Located(e)))?;
        match map.get("pk") {
            Some(item) => Ok(relocate(item.clone())),
            None => Err(fault(format!("environment variable {name} has no value"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn p(s: &str) -> Map {
        match parse_str(s) {
            Ok(m) => m,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    fn v(s: &str, key: &str) -> Value {
        p(s).get(key)
            .unwrap_or_else(|| panic!("{key} missing in {s:?}"))
            .value
            .clone()
    }

    fn err(s: &str) -> ConfError {
        match parse_str(s) {
            Ok(m) => panic!("{s:?} parsed as {m:?}"),
            Err(e) => e,
        }
    }

    fn string(s: &str) -> Value {
        Value::String(s.to_string())
    }

    /// A fresh temporary directory (no tempfile dependency for three tests).
    fn temp_dir() -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "jsserver-conf-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn separators() {
        for src in [
            "port: 4222",
            "port = 4222",
            "port 4222",
            "port:4222",
            "port=4222",
            "port\t4222",
        ] {
            assert_eq!(v(src, "port"), Value::Integer(4222), "{src}");
        }
        let m = p("a: 1; b: 2\nc = 3,\nd 4");
        assert_eq!(m.len(), 4);
        assert_eq!(m.get("d").unwrap().value, Value::Integer(4));
    }

    #[test]
    fn scalar_table() {
        let cases: &[(&str, Value)] = &[
            ("1", Value::Integer(1)),
            ("-1", Value::Integer(-1)),
            ("0", Value::Integer(0)),
            ("1.5", Value::Float(1.5)),
            ("-0.25", Value::Float(-0.25)),
            ("true", Value::Bool(true)),
            ("TRUE", Value::Bool(true)),
            ("yes", Value::Bool(true)),
            ("on", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("no", Value::Bool(false)),
            ("Off", Value::Bool(false)),
            ("\"true\"", string("true")),
            ("'yes'", string("yes")),
            ("hello", string("hello")),
            ("\"a b\"", string("a b")),
            ("'a\\tb'", string("a\\tb")),
            ("\"a\\tb\\n\\\"q\\\"\\\\\\x41\"", string("a\tb\n\"q\"\\A")),
            ("127.0.0.1:4222", string("127.0.0.1:4222")),
            ("0.0.0.0", string("0.0.0.0")),
            ("localhost:4222", string("localhost:4222")),
            ("nats://a.b:4222", string("nats://a.b:4222")),
            ("3secret", string("3secret")),
            ("2024-01-02T03:04:05Z", string("2024-01-02T03:04:05Z")),
            ("\"100ms\"", string("100ms")),
            ("1h30m", string("1h30m")),
            ("100ms", string("100ms")),
            ("/var/lib/js", string("/var/lib/js")),
            ("./a/b.conf", string("./a/b.conf")),
            ("a\\x41", string("aA")),
        ];
        for (src, want) in cases {
            assert_eq!(&v(&format!("k: {src}"), "k"), want, "{src}");
        }
    }

    #[test]
    fn sizes() {
        let cases: &[(&str, i64)] = &[
            ("1k", 1000),
            ("1K", 1000),
            ("1kb", 1024),
            ("512KB", 512 * 1024),
            ("1Ki", 1024),
            ("1KiB", 1024),
            ("64MB", 64 << 20),
            ("2m", 2_000_000),
            ("1MiB", 1 << 20),
            ("1G", 1_000_000_000),
            ("1GB", 1 << 30),
            ("1GiB", 1 << 30),
            ("2T", 2_000_000_000_000),
            ("1TB", 1 << 40),
            ("1PB", 1 << 50),
            ("1EB", 1 << 60),
            ("-1MB", -(1 << 20)),
        ];
        for (src, want) in cases {
            assert_eq!(v(&format!("k: {src}"), "k"), Value::Integer(*want), "{src}");
            assert_eq!(parse_size(src), Some(*want), "parse_size({src})");
        }
        // Raw text is kept for bare scalars.
        assert_eq!(p("k: 2m").get("k").unwrap().raw.as_deref(), Some("2m"));
        assert_eq!(p("k: '2m'").get("k").unwrap().raw, None);
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1x"), None);
        assert_eq!(parse_size("MB"), None);
        assert_eq!(parse_size("16EB"), None);
        // A multi-byte character after the digits is no suffix (this used to
        // panic slicing inside the character).
        assert_eq!(parse_size("1\u{b5}"), None);
        assert_eq!(parse_size("1k\u{e9}"), None);
        assert_eq!(v("k: 1\u{e9}", "k"), string("1\u{e9}"));
        assert!(err("k: 99999999999999999999")
            .message
            .contains("out of range"));
        assert!(err("k: 16EB").message.contains("out of range"));
    }

    #[test]
    fn durations() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("0", Some(Duration::ZERO)),
            ("100ms", Some(Duration::from_millis(100))),
            ("2m", Some(Duration::from_secs(120))),
            ("5s", Some(Duration::from_secs(5))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("1.5s", Some(Duration::from_millis(1500))),
            (".5s", Some(Duration::from_millis(500))),
            ("10us", Some(Duration::from_micros(10))),
            ("10\u{b5}s", Some(Duration::from_micros(10))),
            ("7ns", Some(Duration::from_nanos(7))),
            ("+3s", Some(Duration::from_secs(3))),
            ("1h1m1s1ms", Some(Duration::from_millis(3_661_001))),
            ("", None),
            ("5", None),
            ("-5s", None),
            ("5d", None),
            ("s", None),
            (".s", None),
            ("1e3s", None),
        ];
        for (src, want) in cases {
            assert_eq!(parse_duration(src), *want, "{src:?}");
        }
    }

    #[test]
    fn comments() {
        let m = p("# top\n// also\nport: 4222 # trailing\nhost: h // trailing\n\n  # indented\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m.get("port").unwrap().value, Value::Integer(4222));
        assert_eq!(m.get("host").unwrap().value, string("h"));
        let m = p("a { # c\n  b: 1 // c\n  # c\n}\nl: [1, # c\n 2 // c\n]");
        assert_eq!(
            m.get("a")
                .unwrap()
                .as_map()
                .unwrap()
                .get("b")
                .unwrap()
                .as_int(),
            Some(1)
        );
        let Value::Array(l) = &m.get("l").unwrap().value else {
            panic!()
        };
        assert_eq!(
            l.iter().map(Item::as_int).collect::<Vec<_>>(),
            vec![Some(1), Some(2)]
        );
    }

    #[test]
    fn nested_blocks_and_arrays() {
        let src = r#"
            jetstream {
                store_dir: "/data"
                max_mem: 1GB
                limits { a: 1, b: { c: [1, 2, {d: x}] } }
            }
            jetstream2: { x: 1 }
            jetstream3 = {}
            list = [
              "a"
              'b', c
              [1, 2]
            ]
            empty: []
            "quoted key": 1
            'single key' = 2
        "#;
        let m = p(src);
        let js = m.get("jetstream").unwrap().as_map().unwrap();
        assert_eq!(js.get("store_dir").unwrap().as_str(), Some("/data"));
        assert_eq!(js.get("max_mem").unwrap().as_int(), Some(1 << 30));
        let limits = js.get("limits").unwrap().as_map().unwrap();
        let b = limits.get("b").unwrap().as_map().unwrap();
        let Value::Array(c) = &b.get("c").unwrap().value else {
            panic!()
        };
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].value, Value::Integer(2));
        assert_eq!(c[2].as_map().unwrap().get("d").unwrap().as_str(), Some("x"));
        assert_eq!(m.get("jetstream2").unwrap().as_map().unwrap().len(), 1);
        assert!(m.get("jetstream3").unwrap().as_map().unwrap().is_empty());
        let Value::Array(list) = &m.get("list").unwrap().value else {
            panic!()
        };
        let got: Vec<_> = list[..3].iter().map(|i| i.value.clone()).collect();
        assert_eq!(got, vec![string("a"), string("b"), string("c")]);
        let Value::Array(inner) = &list[3].value else {
            panic!()
        };
        assert_eq!(
            inner.iter().map(|i| i.as_int()).collect::<Vec<_>>(),
            vec![Some(1), Some(2)]
        );
        assert_eq!(m.get("empty").unwrap().value, Value::Array(vec![]));
        assert_eq!(m.get("quoted key").unwrap().as_int(), Some(1));
        assert_eq!(m.get("single key").unwrap().as_int(), Some(2));
    }

    #[test]
    fn line_numbers_of_items() {
        let m = p("\n\na: 1\nb {\n  c: 2\n}\n");
        assert_eq!(m.get("a").unwrap().line, 3);
        assert_eq!(m.get("b").unwrap().line, 4);
        assert_eq!(
            m.get("b").unwrap().as_map().unwrap().get("c").unwrap().line,
            5
        );
    }

    #[test]
    fn wrapped_in_braces_and_key_on_own_line() {
        let m = p("{\n  port: 1\n  host: h\n}\n");
        assert_eq!(m.get("port").unwrap().as_int(), Some(1));
        let m = p("jetstream\n{\n  store_dir: x\n}");
        assert!(m.get("jetstream").unwrap().as_map().is_some());
    }

    #[test]
    fn json_style() {
        let m = p(r#"{
            "port": 4222,
            "jetstream": {"store_dir": "/x", "max_mem": 1024},
            "list": ["a", 1, true, {"k": "v"}],
            "f": 1.5
        }"#);
        assert_eq!(m.get("port").unwrap().as_int(), Some(4222));
        let js = m.get("jetstream").unwrap().as_map().unwrap();
        assert_eq!(js.get("max_mem").unwrap().as_int(), Some(1024));
        let Value::Array(l) = &m.get("list").unwrap().value else {
            panic!()
        };
        assert_eq!(l.len(), 4);
        assert_eq!(l[2].as_bool(), Some(true));
        assert_eq!(m.get("f").unwrap().value, Value::Float(1.5));
    }

    #[test]
    fn semicolons_and_commas() {
        let m = p("a = 1; b = 2;\nc { x: 1; y: 2, z: 3; }\nd: [1,2,3]");
        assert_eq!(m.len(), 4);
        assert_eq!(m.get("c").unwrap().as_map().unwrap().len(), 3);
    }

    #[test]
    fn later_keys_win() {
        let m = p("a: 1\nb: 2\na: 3");
        assert_eq!(m.get("a").unwrap().as_int(), Some(3));
        assert_eq!(m.iter().map(|(k, _)| k).collect::<Vec<_>>(), vec!["a", "b"]);
    }

    #[test]
    fn block_strings() {
        let m = p("k: (\nline1\n  (x) y\n)\nafter: 1\n");
        assert_eq!(m.get("k").unwrap().as_str(), Some("\nline1\n  (x) y"));
        assert_eq!(m.get("after").unwrap().line, 5);
    }

    #[test]
    fn variables() {
        let m = p("TOKEN: \"s3cret\"\nauth { token: $TOKEN }\nport_var = 4333\nport: $port_var");
        let auth = m.get("auth").unwrap().as_map().unwrap();
        assert_eq!(auth.get("token").unwrap().as_str(), Some("s3cret"));
        assert!(m.get("TOKEN").unwrap().used_as_variable);
        assert_eq!(m.get("port").unwrap().as_int(), Some(4333));
        assert!(!m.get("port").unwrap().used_as_variable);
        // Block scoped: inner definitions are visible inside only.
        let m = p("a { X: 1, y: $X }\n");
        assert_eq!(
            m.get("a")
                .unwrap()
                .as_map()
                .unwrap()
                .get("y")
                .unwrap()
                .as_int(),
            Some(1)
        );
        let e = err("a { X: 1 }\nz: $X");
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("'$X' can not be found"), "{e}");
        // bcrypt hashes are strings.
        assert_eq!(v("p: $2a$11$abc", "p"), string("$2a$11$abc"));
    }

    #[test]
    fn variables_from_the_environment() {
        // Unique names: tests run in parallel in one process.
        std::env::set_var("JSSERVER_CONF_TEST_SIZE", "2MB");
        std::env::set_var("JSSERVER_CONF_TEST_STR", "hello world");
        let m = p("a: $JSSERVER_CONF_TEST_SIZE");
        assert_eq!(m.get("a").unwrap().as_int(), Some(2 << 20));
        // Like nats-server, the value is parsed as config: a bare string
        // stops at the first space.
        let e = err("b: $JSSERVER_CONF_TEST_STR");
        assert!(e.file.contains("environment variable"), "{e}");
    }

    #[test]
    fn includes() {
        let dir = temp_dir();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("sub/js.conf"),
            "store_dir: '/x'\ninclude 'deeper.conf'\n",
        )
        .unwrap();
        std::fs::write(dir.join("sub/deeper.conf"), "max_mem: 1KB\n").unwrap();
        std::fs::write(dir.join("auth.conf"), "user: bob\n").unwrap();
        std::fs::write(
            dir.join("main.conf"),
            "port: 1\njetstream {\n  include ./sub/js.conf\n}\ninclude \"auth.conf\"\nport: 2\n",
        )
        .unwrap();
        let m = parse_file(&dir.join("main.conf")).unwrap();
        assert_eq!(m.get("port").unwrap().as_int(), Some(2));
        assert_eq!(m.get("user").unwrap().as_str(), Some("bob"));
        let js = m.get("jetstream").unwrap().as_map().unwrap();
        assert_eq!(js.get("store_dir").unwrap().as_str(), Some("/x"));
        let mem = js.get("max_mem").unwrap();
        assert_eq!(mem.as_int(), Some(1024));
        assert!(mem.origin.ends_with("deeper.conf"), "{}", mem.origin);

        // Errors inside an included file name that file and line.
        std::fs::write(dir.join("bad.conf"), "ok: 1\nbad: [1,\n\n").unwrap();
        std::fs::write(dir.join("inc_bad.conf"), "a: 1\ninclude bad.conf\n").unwrap();
        let e = parse_file(&dir.join("inc_bad.conf")).unwrap_err();
        assert!(e.file.ends_with("bad.conf"), "{e}");
        assert_eq!(e.line, Some(2));

        // A missing include is reported at the include line.
        std::fs::write(dir.join("missing.conf"), "\ninclude nope.conf\n").unwrap();
        let e = parse_file(&dir.join("missing.conf")).unwrap_err();
        assert!(e.file.ends_with("missing.conf") && e.line == Some(2), "{e}");
        assert!(e.to_string().contains("nope.conf"), "{e}");

        // Cycles are detected.
        std::fs::write(dir.join("cycle.conf"), "include cycle.conf\n").unwrap();
        let e = parse_file(&dir.join("cycle.conf")).unwrap_err();
        assert!(e.message.contains("cycle"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_file() {
        let e = parse_file(Path::new("/nonexistent/x.conf")).unwrap_err();
        assert_eq!(e.line, None);
        assert!(
            e.to_string()
                .starts_with("config file /nonexistent/x.conf: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn errors_have_line_numbers() {
        let cases: &[(&str, usize, &str)] = &[
            ("a: 1\nb: \"unterminated\n\n", 2, "unterminated"),
            ("a: 1\n\nb: [1, 2\n", 3, "no closing ']'"),
            ("a {\n  b: 1\n", 3, "no closing '}'"),
            ("a: 1\nb:\nc: 2", 2, "new line"),
            ("a: 1\n\n\n= 2", 4, "separator"),
            ("a: 1 2", 1, "after the value"),
            ("x: 1\ny: \"\\q\"", 2, "invalid escape"),
            ("x: 1\ny: \"\\xZZ\"", 2, "hexadecimal"),
            ("x: 1\n\ny: .5", 3, "digit"),
            ("x: -abc", 1, "digit"),
            ("x: [1,,2]", 1, "unexpected ','"),
            ("a: 1\n}", 2, "expected a key"),
            ("a: 1\nb", 2, "no value"),
            ("a: 1\n(\n", 2, "no value"),
            ("k: (\nnever closed", 1, "unterminated block"),
            ("{ a: 1 } b", 1, "after the closing"),
            ("a: 1\nb: 'x", 2, "unterminated single-quoted"),
            ("a: 1\n\"k: 1", 2, "unterminated quoted key"),
            ("a: 1\nb: $NOPE_JSSERVER_UNSET", 2, "can not be found"),
        ];
        for (src, line, needle) in cases {
            let e = err(src);
            assert_eq!(e.line, Some(*line), "{src:?}: {e}");
            assert!(e.message.contains(needle), "{src:?}: {e}");
            assert!(e.to_string().starts_with(&format!("<string>:{line}:")));
        }
    }

    #[test]
    fn more_error_productions() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "a: 1\ninclude [x]",
                2,
                "expected an include path, found '['",
            ),
            (
                "a: 1\ninclude \n",
                2,
                "expected an include path, found a new line",
            ),
            ("include ", 1, "expected an include path, found end of file"),
            ("a: 1\ninclude 'x\n", 2, "unterminated quoted include path"),
            ("a: \"x\\", 1, "invalid escape at end of file"),
            ("a: 1\nb: [1 2]", 2, "unexpected '2' in array"),
            ("a: 1\nb: [1; 2]", 2, "unexpected ';' in array"),
            ("a: 1\n\nb: }", 3, "expected a value, found '}'"),
            ("a: 1\nb: # c", 2, "found a comment"),
            ("a: 1\nb: 1.5 2", 2, "after the value of \"b\""),
            ("a: 1\n:", 2, "unexpected key separator ':'"),
            ("a: 1\n;", 2, "unexpected ';', expected a key"),
            ("a: 1\nb: --5", 2, "expected a digit after '-'"),
            ("a: 1\nb: -.5", 2, "floats must start with a digit"),
            (
                "x {\n  a: 1\n\n",
                4,
                "the map opened on line 1 has no closing '}'",
            ),
        ];
        for (src, line, needle) in cases {
            let e = err(src);
            assert_eq!(e.line, Some(*line), "{src:?}: {e}");
            assert!(e.message.contains(needle), "{src:?}: {e}");
        }
        let big = format!("k: 1{}.5", "0".repeat(400));
        assert!(err(&big).message.contains("float"), "float out of range");
        // Lines after a quoted string or block that spans lines.
        let m = p("a: \"x\ny\"\nb: (\n1\n2\n)\nc: 3");
        assert_eq!(m.get("a").unwrap().as_str(), Some("x\ny"));
        assert_eq!(m.get("b").unwrap().line, 3);
        assert_eq!(m.get("c").unwrap().line, 7);
    }

    #[test]
    fn empty_and_blank_files() {
        assert!(p("").is_empty());
        assert!(p("\n  # only comments\n// more\n").is_empty());
        assert!(p("{}").is_empty());
    }

    #[test]
    fn crlf_line_endings() {
        let m = p("a: 1\r\nb: two\r\nc {\r\n  d: 3\r\n}\r\n");
        assert_eq!(m.get("b").unwrap().as_str(), Some("two"));
        assert_eq!(
            m.get("c").unwrap().as_map().unwrap().get("d").unwrap().line,
            4
        );
    }

    #[test]
    fn items_are_located_at_their_key_with_a_column() {
        let m = p(
            "a: 1\n  b = 2\n\t\"q k\": 3\nm\n{\n    x: [1,\n      {y: 2}]\n}\nl: [\n  10, 20]\n",
        );
        let at = |i: &Item| (i.line, i.column);
        // Columns are 1-based bytes (a tab is one), as nats-server's lexer counts them from
        // the second line on (on the first, nats-server counts from 0).
        assert_eq!(at(m.get("a").unwrap()), (1, 1));
        assert_eq!(at(m.get("b").unwrap()), (2, 3));
        // A quoted key at its first character, after the quote (nats-server's place).
        assert_eq!(at(m.get("q k").unwrap()), (3, 3));
        // A map entry at its key even when the value starts on a later line.
        let map = m.get("m").unwrap();
        assert_eq!(at(map), (4, 1));
        let x = map.as_map().unwrap().get("x").unwrap();
        assert_eq!(at(x), (6, 5));
        // Array elements at themselves; entries of a map in an array at their key.
        let Value::Array(elems) = &x.value else {
            panic!()
        };
        assert_eq!(at(&elems[0]), (6, 9));
        assert_eq!(at(&elems[1]), (7, 7));
        assert_eq!(at(elems[1].as_map().unwrap().get("y").unwrap()), (7, 8));
        let Value::Array(l) = &m.get("l").unwrap().value else {
            panic!()
        };
        assert_eq!((at(&l[0]), at(&l[1])), ((10, 3), (10, 7)));
        // Multi-byte characters count their bytes.
        let m = p("x: 1\n\u{e9}\u{e9}: { k: 1 }\n");
        let e = m.get("\u{e9}\u{e9}").unwrap();
        assert_eq!(at(e.as_map().unwrap().get("k").unwrap()), (2, 9));
        // A variable's value is located where it is used (at its key in a map).
        let m = p("V: 1\nw {\n  z: $V\n}\nl: [\n  $V]\n");
        let w = m.get("w").unwrap().as_map().unwrap();
        assert_eq!(at(w.get("z").unwrap()), (3, 3));
        let Value::Array(l) = &m.get("l").unwrap().value else {
            panic!()
        };
        assert_eq!(at(&l[0]), (6, 3));
        // Errors carry the place too.
        let e = err("a: 1\n  b: [1 2]\n");
        assert_eq!((e.line, e.column), (Some(2), Some(9)), "{e}");
        assert_eq!(e.to_string(), format!("<string>:2:9: {}", e.message));
        assert_eq!(
            unknown_field("b", m.get("w").unwrap()).unwrap().to_string(),
            "<string>:2:1: unknown field \"b\""
        );
        assert!(unknown_field("V", m.get("V").unwrap()).is_none());
    }

    #[test]
    fn hex_escapes_are_bytes() {
        // As in Go's strings: `\xc3\xa9` is one character, and a byte that is no UTF-8
        // becomes U+FFFD (one per byte, as Go's JSON shows it).
        assert_eq!(v("k: \"\\xc3\\xa9\\x41\"", "k"), string("\u{e9}A"));
        assert_eq!(v("k: \"a\\xffb\"", "k"), string("a\u{fffd}b"));
        assert_eq!(v("k: \"\\xe2\\x80x\"", "k"), string("\u{fffd}\u{fffd}x"));
        assert_eq!(
            v("k: \"\\xf0\\x9f\\x98\"", "k"),
            string("\u{fffd}\u{fffd}\u{fffd}")
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |n: usize, open: &str, close: &str| {
            format!("k: {}1{}", open.repeat(n), close.repeat(n))
        };
        let maps =
            |n: usize| format!("k: {}{}", "{a: ".repeat(n), "}".repeat(n)).replace(": }", ": 1}");
        assert!(parse_str(&nested(MAX_NESTING, "[", "]")).is_ok());
        assert!(parse_str(&maps(MAX_NESTING)).is_ok());
        for text in [nested(MAX_NESTING + 1, "[", "]"), maps(MAX_NESTING + 1)] {
            let e = err(&text);
            assert!(e.message.contains("nested more than 64 deep"), "{e}");
        }
        // Far deeper input fails the same way (no stack overflow), also unclosed.
        let e = err(&format!("k: {}", "[".repeat(100_000)));
        assert!(e.message.contains("nested more than 64 deep"), "{e}");
        let e = err(&"k {".repeat(100_000));
        assert!(e.message.contains("nested more than 64 deep"), "{e}");
        // A variable cannot stack its own depth on top of the place it is used.
        let half = MAX_NESTING / 2 + 1;
        let text = format!(
            "V: {}1{}\nw: {}$V{}\n",
            "[".repeat(half),
            "]".repeat(half),
            "[".repeat(half),
            "]".repeat(half)
        );
        let e = err(&text);
        assert!(e.message.contains("through '$V'"), "{e}");
        // The deepest allowed config parses on a thread with tokio's blocking-pool stack
        // (a reload runs there).
        let deepest = format!(
            "{}\n{}",
            nested(MAX_NESTING, "[", "]"),
            maps(MAX_NESTING).replacen("k:", "m:", 1)
        );
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || parse_str(&deepest).map(|m| m.len()))
            .unwrap()
            .join()
            .expect("no stack overflow")
            .unwrap();
    }

    #[test]
    fn copies_made_by_variables_are_bounded() {
        // Each level copies the previous one ten times: 10^7 values from a few lines.
        let mut text = String::from("a0: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n");
        for i in 1..8 {
            let refs = vec![format!("$a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: [{refs}]\n"));
        }
        let e = err(&text);
        assert!(e.message.contains("more than 2097152 values"), "{e}");
        // A plain long array is fine.
        let list = vec!["1"; 10_000].join(", ");
        assert!(parse_str(&format!("k: [{list}]")).is_ok());
        // Few values, but each a copy of 1 MiB of text: 10^4 MiB from a few lines.
        let mut text = format!("s0: \"{}\"\n", "x".repeat(1 << 20));
        for i in 1..5 {
            let refs = vec![format!("$s{}", i - 1); 10].join(", ");
            text.push_str(&format!("s{i}: [{refs}]\n"));
        }
        let e = err(&text);
        assert!(e.message.contains("more than 32 MiB"), "{e}");
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn includes_are_bounded() {
        let dir = temp_dir();
        // Each file includes the next ten times: 10^6 includes of files that exist.
        for i in 0..6 {
            let next = format!("include ./f{}.conf\n", i + 1).repeat(10);
            std::fs::write(dir.join(format!("f{i}.conf")), next).unwrap();
        }
        std::fs::write(dir.join("f6.conf"), "x: 1\n").unwrap();
        let e = parse_file(&dir.join("f0.conf")).unwrap_err();
        assert!(
            e.to_string().contains("more than 4096 include files"),
            "{e}"
        );
        // An include that is not a regular file (a device never ends).
        std::fs::write(dir.join("dev.conf"), "a: 1\ninclude /dev/zero\n").unwrap();
        let e = parse_file(&dir.join("dev.conf")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("not a regular file"), "{e}");
        // Text past the bound, and text that is not UTF-8.
        let big = dir.join("big.conf");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_TEXT_BYTES as u64 + 1).unwrap();
        let e = parse_file(&big).unwrap_err();
        assert!(e.message.contains("more than 32 MiB"), "{e}");
        std::fs::write(dir.join("bin.conf"), b"a: 1\nb: \xff\n").unwrap();
        let e = parse_file(&dir.join("bin.conf")).unwrap_err();
        assert!(e.message.contains("not UTF-8 text"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn digest_as_nats_server() {
        // Digests nats-server 2.15.1 prints for these files (`nats-server -t -c FILE`).
        let text = "port: 4333\n";
        assert_eq!(
            digest(&p(text)),
            "sha256:5942f6739f1572892ba80b954eee212713f172258629e16936dfeeae8e2eb80d"
        );
        let text = "# digest check\nport: 4333\nP: 4444\nhttp_port: $P\n\
            server_metadata { \"a<b>&c\": \"x\\ty\\x08\\x0c\\x01 \\xe2\\x80\\xa8 \u{e9}\", plain: 'raw\\q' }\n\
            authorization { users: [ {user: a, password: b, permissions: { publish: [\"x.>\", \"y\"] }} ], timeout: 2.5 }\n\
            jetstream { store_dir: \"/tmp/jsdig\", max_mem: 64MB, max_file: 1G, sync_interval: always }\n\
            debug: yes\nlogtime: off\nserver_tags: [\"AZ:1\", \"Disk\"]\nlame_duck_duration: \"45s\"\nmax_payload: 1MB\n";
        assert_eq!(
            digest(&p(text)),
            "sha256:1996467a94d70d1ccbd7e2cb02f49a0eab07024328363a5ebfa9a03bcbd1d2d4"
        );
        // Go's float forms.
        let mut out = String::new();
        for f in [
            2.5,
            1e-7,
            1e21,
            12345678901234567890123.5,
            0.000001,
            -0.0,
            100.0,
        ] {
            go_json_float(f, &mut out);
            out.push(' ');
        }
        assert_eq!(
            out,
            "2.5 1e-7 1e+21 1.2345678901234568e+22 0.000001 -0 100 "
        );
    }
}
