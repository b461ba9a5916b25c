//! Reading JSON objects the way Go's `encoding/json` fills a struct, where clients rely on it.
//!
//! Go matches an object's keys to a struct's fields without regard to case (`{"BATCH":2}`
//! sets `batch`), and a key given twice keeps its last value. serde matches keys exactly and
//! refuses duplicates, so bodies that nats-server accepts would be refused or half read.
//! [`fold_keys`] renames keys to the field names they fold to before serde sees them.

use serde_json::{Map, Value};

/// Renames each key of `object` that equals one of `fields` ignoring ASCII case to that field
/// name, as Go's decoder matches them (it folds Unicode too; only ASCII is folded here).
/// When a field is given both exactly and in another case, the exact spelling wins (Go takes
/// the later one in the text, which a parsed map no longer knows). Other keys are kept as
/// they are (unknown fields are for the caller's serde rules). O(keys × fields).
pub(crate) fn fold_keys(object: Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::with_capacity(object.len());
    let mut folded = Vec::new();
    for (key, value) in object {
        match fields
            .iter()
            .find(|f| f.eq_ignore_ascii_case(&key) && **f != key)
        {
            Some(field) => folded.push(((*field).to_owned(), value)),
            None => {
                out.insert(key, value);
            }
        }
    }
    for (field, value) in folded {
        out.entry(field).or_insert(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn keys_fold_to_field_names_and_exact_spellings_win() {
        let fields = ["batch", "no_wait"];
        let got = fold_keys(
            object(json!({"BATCH": 2, "No_Wait": true, "other": 1})),
            &fields,
        );
        assert_eq!(
            Value::Object(got),
            json!({"batch": 2, "no_wait": true, "other": 1})
        );
        let got = fold_keys(object(json!({"Batch": 2, "batch": 3})), &fields);
        assert_eq!(Value::Object(got), json!({"batch": 3}));
    }
}
