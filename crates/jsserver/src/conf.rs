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
//! Errors carry the file and line: `config file foo.conf line 7: ...`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Maximum nesting of `include`s (and of environment variables that refer to
/// further variables) before parsing gives up.
const MAX_DEPTH: usize = 16;

/// A parse (or later, value) error in a config file, with its location.
///
/// Displays as `config file FILE line N: MESSAGE`, or `config file FILE:
/// MESSAGE` when no line applies (e.g. the file cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    /// The file as named by the user or an `include` (or `<string>`, or
    /// `environment variable NAME`).
    pub file: String,
    /// 1-based line number, if the error is at a place in the file.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl ConfError {
    /// An error about `item`, located at its file and line.
    pub fn at(item: &Item, message: impl Into<String>) -> Self {
        ConfError {
            file: item.origin.to_string(),
            line: Some(item.line),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "config file {} line {}: {}",
                self.file, line, self.message
            ),
            None => write!(f, "config file {}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfError {}

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
    /// 1-based line of the value's first character.
    pub line: usize,
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
/// Errors: the file cannot be read, or a syntax error (with its line).
pub fn parse_file(path: &Path) -> Result<Map, ConfError> {
    parse_file_at(path, 0, &mut Vec::new())
}

/// Parses config text; includes are relative to the current directory and
/// errors name the file `<string>`.
pub fn parse_str(input: &str) -> Result<Map, ConfError> {
    Parser::new(
        input,
        Arc::from("<string>"),
        PathBuf::from("."),
        0,
        Vec::new(),
    )
    .document()
}

fn parse_file_at(path: &Path, depth: usize, chain: &mut Vec<PathBuf>) -> Result<Map, ConfError> {
    let origin: Arc<str> = Arc::from(path.display().to_string());
    let err = |message: String| ConfError {
        file: origin.to_string(),
        line: None,
        message,
    };
    if depth > MAX_DEPTH {
        return Err(err(format!("includes nested more than {MAX_DEPTH} deep")));
    }
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if chain.contains(&canonical) {
        return Err(err("include cycle: the file includes itself".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    chain.push(canonical);
    let result = Parser::new(&text, origin.clone(), dir, depth, chain.clone()).document();
    chain.pop();
    result
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
        Some(c) => (c, &suffix[1..]),
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

/// Parses a Go duration string (`time.ParseDuration`): `"0"`, or a sequence of
/// decimal numbers, each with optional fraction and a unit `ns`, `us` (`µs`),
/// `ms`, `s`, `m`, `h`: `100ms`, `1.5h`, `1h30m`, `+5s`. Negative durations
/// and overflow give `None`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    const UNITS: [(&str, u128); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("\u{b5}s", 1_000),
        ("\u{3bc}s", 1_000),
        ("ms", 1_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
    ];
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let frac_len = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..frac_len];
            rest = &r[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let (unit, scale) = UNITS.iter().find(|(u, _)| rest.starts_with(u))?;
        rest = &rest[unit.len()..];
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        total = total.checked_add(int.checked_mul(*scale)?)?;
        // Fraction: keep at most 20 digits; more cannot change whole nanoseconds
        // of any duration that fits.
        let frac_digits = &frac_part[..frac_part.len().min(20)];
        if !frac_digits.is_empty() {
            let frac: u128 = frac_digits.parse().ok()?;
            let denom = 10u128.pow(frac_digits.len() as u32);
            total = total.checked_add(frac * scale / denom)?;
        }
    }
    let nanos = u64::try_from(total).ok()?;
    Some(Duration::from_nanos(nanos))
}

fn is_nl(c: char) -> bool {
    c == '\n' || c == '\r'
}

fn is_inline_ws(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Characters that end a bare (unquoted) value.
fn ends_bare(c: char) -> bool {
    is_nl(c) || is_inline_ws(c) || matches!(c, ',' | ';' | '}' | ']')
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    line: usize,
    origin: Arc<str>,
    /// Directory that `include` paths are relative to.
    dir: PathBuf,
    /// Include / variable nesting depth.
    depth: usize,
    /// Canonical paths of the files being parsed (for include cycles).
    chain: Vec<PathBuf>,
    /// Maps being built, outermost first, for `$VAR` look-ups.
    scopes: Vec<Map>,
}

type PResult<T> = Result<T, ConfError>;

impl<'a> Parser<'a> {
    fn new(
        src: &'a str,
        origin: Arc<str>,
        dir: PathBuf,
        depth: usize,
        chain: Vec<PathBuf>,
    ) -> Self {
        let src = src.strip_prefix('\u{feff}').unwrap_or(src);
        Parser {
            src,
            pos: 0,
            line: 1,
            origin,
            dir,
            depth,
            chain,
            scopes: Vec::new(),
        }
    }

    fn err(&self, message: impl Into<String>) -> ConfError {
        self.err_at(self.line, message)
    }

    fn err_at(&self, line: usize, message: impl Into<String>) -> ConfError {
        ConfError {
            file: self.origin.to_string(),
            line: Some(line),
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.src[self.pos..].chars();
        it.next();
        it.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn at_comment(&self) -> bool {
        match self.peek() {
            Some('#') => true,
            Some('/') => self.peek2() == Some('/'),
            _ => false,
        }
    }

    /// Skips a comment up to (not including) the end of the line.
    fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if is_nl(c) {
                break;
            }
            self.bump();
        }
    }

    /// Skips whitespace (new lines too) and comments.
    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if self.at_comment() {
                self.skip_comment();
            } else {
                break;
            }
        }
    }

    /// Skips spaces and tabs, and a trailing comment.
    fn skip_inline(&mut self) {
        while let Some(c) = self.peek() {
            if is_inline_ws(c) {
                self.bump();
            } else if self.at_comment() {
                self.skip_comment();
                break;
            } else {
                break;
            }
        }
    }

    fn document(mut self) -> PResult<Map> {
        self.scopes.push(Map::default());
        self.skip_blank();
        if self.peek() == Some('{') {
            let line = self.line;
            self.bump();
            self.body(Some((line, '}')))?;
            self.skip_blank();
            if let Some(c) = self.peek() {
                return Err(self.err(format!("unexpected {c:?} after the closing '}}'")));
            }
        } else {
            self.body(None)?;
        }
        Ok(self.scopes.pop().unwrap_or_default())
    }

    /// Parses `key value` entries into the innermost scope until EOF (top
    /// level) or the closing brace (`close` = line it was opened on, char).
    fn body(&mut self, close: Option<(usize, char)>) -> PResult<()> {
        loop {
            self.skip_blank();
            match self.peek() {
                None => {
                    return match close {
                        Some((line, _)) => Err(self.err(format!(
                            "unexpected end of file: the map opened on line {line} has no closing '}}'"
                        ))),
                        None => Ok(()),
                    };
                }
                Some(c) if close.is_some_and(|(_, cl)| cl == c) => {
                    self.bump();
                    return Ok(());
                }
                Some(c @ ('=' | ':')) => {
                    return Err(self.err(format!("unexpected key separator {c:?}")))
                }
                Some(c @ ('}' | ']' | ',' | ';')) => {
                    return Err(self.err(format!("unexpected {c:?}, expected a key")))
                }
                Some(_) => {}
            }
            let key = self.entry()?;
            // The end of a value: a new line, ';' or ',', or the closing brace.
            self.skip_inline();
            match self.peek() {
                None => {}
                Some(c) if is_nl(c) || c == ';' || c == ',' => {
                    self.bump();
                }
                Some(c) if close.is_some_and(|(_, cl)| cl == c) => {}
                Some(c) => {
                    return Err(self.err(format!(
                    "unexpected {c:?} after the value of {key:?}; expected a new line, ';' or ','"
                )))
                }
            }
        }
    }

    /// Parses one `key value` (or `include`) into the innermost scope;
    /// returns the key for messages.
    fn entry(&mut self) -> PResult<String> {
        let key_line = self.line;
        let (key, quoted) = self.key()?;
        if !quoted && key.eq_ignore_ascii_case("include") && self.peek().is_some_and(is_inline_ws) {
            self.include()?;
            return Ok(key);
        }
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
        if matches!(self.peek(), Some('=' | ':')) {
            self.bump();
            while self.peek().is_some_and(is_inline_ws) {
                self.bump();
            }
        }
        match self.peek() {
            None => {
                return Err(self.err_at(key_line, format!("key {key:?} has no value")));
            }
            Some(c) if is_nl(c) => {
                return Err(self.err(format!(
                    "expected a value for key {key:?}, found a new line"
                )))
            }
            Some(_) if self.at_comment() => {
                return Err(self.err(format!("expected a value for key {key:?}, found a comment")))
            }
            _ => {}
        }
        let item = self.value()?;
        self.scope().insert(key.clone(), item);
        Ok(key)
    }

    fn scope(&mut self) -> &mut Map {
        if self.scopes.is_empty() {
            self.scopes.push(Map::default());
        }
        let last = self.scopes.len() - 1;
        &mut self.scopes[last]
    }

    fn key(&mut self) -> PResult<(String, bool)> {
        let line = self.line;
        if let Some(q @ ('"' | '\'')) = self.peek() {
            self.bump();
            let start = self.pos;
            loop {
                match self.peek() {
                    None => return Err(self.err_at(line, "unterminated quoted key")),
                    Some(c) if c == q => break,
                    Some(_) => {
                        self.bump();
                    }
                }
            }
            let key = self.src[start..self.pos].to_string();
            self.bump();
            return Ok((key, true));
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || matches!(c, '=' | ':' | '{' | '[') {
                break;
            }
            self.bump();
        }
        Ok((self.src[start..self.pos].to_string(), false))
    }

    fn include(&mut self) -> PResult<()> {
        let line = self.line;
        while self.peek().is_some_and(is_inline_ws) {
            self.bump();
        }
        let path = match self.peek() {
            Some(q @ ('"' | '\'')) => {
                self.bump();
                let start = self.pos;
                loop {
                    match self.peek() {
                        None => return Err(self.err_at(line, "unterminated quoted include path")),
                        Some(c) if c == q => break,
                        Some(_) => {
                            self.bump();
                        }
                    }
                }
                let p = self.src[start..self.pos].to_string();
                self.bump();
                p
            }
            Some(c @ ('[' | '{' | '(')) => {
                return Err(self.err(format!("expected an include path, found {c:?}")))
            }
            None => return Err(self.err("expected an include path, found end of file")),
            Some(c) if is_nl(c) => {
                return Err(self.err("expected an include path, found a new line"))
            }
            Some(_) => {
                let start = self.pos;
                while let Some(c) = self.peek() {
                    if c.is_whitespace() || matches!(c, ';' | '}') {
                        break;
                    }
                    self.bump();
                }
                self.src[start..self.pos].to_string()
            }
        };
        let full = self.dir.join(&path);
        let mut chain = self.chain.clone();
        let included = parse_file_at(&full, self.depth + 1, &mut chain).map_err(|e| {
            if e.line.is_none() {
                // Cannot read the file: report at the include line.
                self.err_at(line, format!("include {path:?}: {}", e.message))
            } else {
                e
            }
        })?;
        let scope = self.scope();
        for (k, v) in included.entries {
            scope.insert(k, v);
        }
        Ok(())
    }

    fn item(&self, value: Value, line: usize, raw: Option<String>) -> Item {
        Item {
            value,
            line,
            origin: self.origin.clone(),
            raw,
            used_as_variable: false,
        }
    }

    fn value(&mut self) -> PResult<Item> {
        let line = self.line;
        match self.peek() {
            Some('[') => {
                self.bump();
                self.array(line)
            }
            Some('{') => {
                self.bump();
                self.scopes.push(Map::default());
                let res = self.body(Some((line, '}')));
                let map = self.scopes.pop().unwrap_or_default();
                res?;
                Ok(self.item(Value::Map(map), line, None))
            }
            Some('\'') => {
                self.bump();
                let start = self.pos;
                loop {
                    match self.peek() {
                        None => return Err(self.err_at(line, "unterminated single-quoted string")),
                        Some('\'') => break,
                        Some(_) => {
                            self.bump();
                        }
                    }
                }
                let s = self.src[start..self.pos].to_string();
                self.bump();
                Ok(self.item(Value::String(s), line, None))
            }
            Some('"') => {
                self.bump();
                let s = self.escaped_until(Some('"'), line)?.0;
                Ok(self.item(Value::String(s), line, None))
            }
            Some('(') => {
                self.bump();
                self.block(line)
            }
            Some('.') if self.peek2().is_some_and(|c| c.is_ascii_digit()) => {
                Err(self.err("floats must start with a digit"))
            }
            Some(c) if c.is_ascii_digit() || c == '-' => self.number_like(line),
            _ => self.bare(line),
        }
    }

    fn array(&mut self, line: usize) -> PResult<Item> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            match self.peek() {
                None => return Err(self.err_at(line, "unterminated array: no closing ']'")),
                Some(']') => {
                    self.bump();
                    break;
                }
                Some(',') => return Err(self.err("unexpected ',' in array")),
                Some(_) => {}
            }
            items.push(self.value()?);
            self.skip_inline();
            match self.peek() {
                Some(c) if c == ',' || is_nl(c) => {
                    self.bump();
                }
                Some(']') => {
                    self.bump();
                    break;
                }
                None => return Err(self.err_at(line, "unterminated array: no closing ']'")),
                Some(c) => {
                    return Err(self.err(format!("unexpected {c:?} in array; expected ',' or ']'")))
                }
            }
        }
        Ok(self.item(Value::Array(items), line, None))
    }

    /// `( ... )`: everything up to a `)` alone on a line.
    fn block(&mut self, line: usize) -> PResult<Item> {
        let start = self.pos;
        loop {
            let Some(c) = self.bump() else {
                return Err(self.err_at(line, "unterminated block: no ')' alone on a line"));
            };
            if c == '\n'
                && self.peek() == Some(')')
                && matches!(self.peek2(), None | Some('\n') | Some('\r'))
            {
                let s = self.src[start..self.pos - 1].to_string();
                self.bump();
                return Ok(self.item(Value::String(s), line, None));
            }
        }
    }

    /// Reads a string with escapes up to `quote` (consumed) or, for bare
    /// strings (`quote` None), up to a value terminator. Returns the text and
    /// whether it had escapes.
    fn escaped_until(&mut self, quote: Option<char>, line: usize) -> PResult<(String, bool)> {
        let mut out = String::new();
        let mut escaped = false;
        loop {
            let Some(c) = self.peek() else {
                return match quote {
                    Some(_) => Err(self.err_at(line, "unterminated double-quoted string")),
                    None => Ok((out, escaped)),
                };
            };
            match quote {
                Some(q) if c == q => {
                    self.bump();
                    return Ok((out, escaped));
                }
                None if ends_bare(c) => return Ok((out, escaped)),
                _ => {}
            }
            self.bump();
            if c != '\\' {
                out.push(c);
                continue;
            }
            escaped = true;
            match self.bump() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('x') => {
                    let hex: String = [self.bump(), self.bump()].into_iter().flatten().collect();
                    match u8::from_str_radix(&hex, 16) {
                        Ok(b) if hex.len() == 2 => out.push(char::from(b)),
                        _ => {
                            return Err(self.err(format!(
                                "expected two hexadecimal digits after '\\x', got {hex:?}"
                            )))
                        }
                    }
                }
                other => {
                    return Err(self.err(format!(
                        "invalid escape {}; allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\",
                        other.map_or("at end of file".to_string(), |c| format!("'\\{c}'"))
                    )))
                }
            }
        }
    }

    /// A bare value starting with a digit or '-': integer (with size
    /// suffix), float, IP address, datetime, or a string such as `1h30m`.
    fn number_like(&mut self, line: usize) -> PResult<Item> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if ends_bare(c) {
                break;
            }
            self.bump();
        }
        let tok = &self.src[start..self.pos];
        let raw = Some(tok.to_string());
        let unsigned = tok.strip_prefix('-').unwrap_or(tok);
        if !unsigned.starts_with(|c: char| c.is_ascii_digit()) {
            if unsigned.starts_with('.') {
                return Err(self.err_at(line, "floats must start with a digit"));
            }
            return Err(self.err_at(line, format!("expected a digit after '-', found {tok:?}")));
        }
        let digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
        let after = &unsigned[digits..];
        let value = if after.is_empty() || size_multiplier(after).is_some() {
            let Ok(num) = tok[..tok.len() - after.len()].parse::<i64>() else {
                return Err(self.err_at(line, format!("integer {tok:?} is out of range")));
            };
            let mult = size_multiplier(after).unwrap_or(1);
            match num.checked_mul(mult) {
                Some(v) => Value::Integer(v),
                None => return Err(self.err_at(line, format!("integer {tok:?} is out of range"))),
            }
        } else if after.starts_with('.')
            && after.len() > 1
            && after[1..].bytes().all(|b| b.is_ascii_digit())
        {
            match tok.parse::<f64>() {
                Ok(f) if f.is_finite() => Value::Float(f),
                _ => return Err(self.err_at(line, format!("float {tok:?} is out of range"))),
            }
        } else {
            // 127.0.0.1:4222, 2024-01-02T03:04:05Z, 1h30m, 100ms, 3secret.
            Value::String(tok.to_string())
        };
        Ok(self.item(value, line, raw))
    }

    fn bare(&mut self, line: usize) -> PResult<Item> {
        let start = self.pos;
        let (s, escaped) = self.escaped_until(None, line)?;
        if s.is_empty() {
            let c = self
                .peek()
                .map_or("end of file".to_string(), |c| format!("{c:?}"));
            return Err(self.err(format!("expected a value, found {c}")));
        }
        let raw = Some(self.src[start..self.pos].to_string());
        if escaped {
            return Ok(self.item(Value::String(s), line, raw));
        }
        match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => return Ok(self.item(Value::Bool(true), line, raw)),
            "false" | "no" | "off" => return Ok(self.item(Value::Bool(false), line, raw)),
            _ => {}
        }
        match s.strip_prefix('$') {
            // A bcrypt hash, not a variable (as nats-server).
            Some(name) if name.starts_with("2a$") => Ok(self.item(Value::String(s), line, raw)),
            Some(name) => self.variable(name, line),
            None => Ok(self.item(Value::String(s), line, raw)),
        }
    }

    fn variable(&mut self, name: &str, line: usize) -> PResult<Item> {
        for scope in self.scopes.iter_mut().rev() {
            if let Some(found) = scope.get_mut(name) {
                found.used_as_variable = true;
                let mut item = found.clone();
                item.used_as_variable = false;
                item.line = line;
                item.origin = self.origin.clone();
                item.raw = None;
                return Ok(item);
            }
        }
        let Ok(env) = std::env::var(name) else {
            return Err(self.err_at(
                line,
                format!("variable reference for '${name}' can not be found"),
            ));
        };
        if self.depth >= MAX_DEPTH {
            return Err(self.err_at(line, format!("variable '${name}' nests too deeply")));
        }
        let text = format!("pk={env}");
        let origin: Arc<str> = Arc::from(format!("environment variable {name}"));
        let map = Parser::new(
            &text,
            origin,
            self.dir.clone(),
            self.depth + 1,
            self.chain.clone(),
        )
        .document()?;
        match map.get("pk") {
            Some(v) => {
                let mut item = v.clone();
                item.line = line;
                item.origin = self.origin.clone();
                item.raw = None;
                Ok(item)
            }
            None => Err(self.err_at(line, format!("environment variable {name} has no value"))),
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
            assert!(e
                .to_string()
                .starts_with(&format!("config file <string> line {line}: ")));
        }
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
}
