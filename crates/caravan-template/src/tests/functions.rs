//! The helper functions, with the outputs consul-template prints.

use super::*;

#[test]
fn env_functions() {
    assert_eq!(
        t(r#"{{ env "HOME" }}|{{ env "NOPE" }}|{{ envOrDefault "NOPE" "d" }}"#),
        "/home/app||d"
    );
    let e = World::new().err(r#"{{ mustEnv "NOPE" }}"#);
    assert!(e.contains("NOPE"), "{e}");
}

#[test]
fn string_functions() {
    assert_eq!(t(r#"{{ "a,b" | split "," | join ";" }}"#), "a;b");
    assert_eq!(t(r#"{{ "aXbX" | replaceAll "X" "-" }}"#), "a-b-");
    assert_eq!(t(r#"{{ "Hi" | toLower }}{{ "hi" | toUpper }}"#), "hiHI");
    assert_eq!(
        t(r#"{{ "hello wORLD o'neil" | toTitle }}"#),
        "Hello WORLD O'neil"
    );
    assert_eq!(
        t(
            r#"{{ "  x  " | trimSpace }}|{{ "--x--" | trim "-" }}|{{ "ab" | trimPrefix "a" }}|{{ "ab" | trimSuffix "b" }}"#
        ),
        "x|x|b|a"
    );
    assert_eq!(t(r#"{{ "a\nb\n\nc" | indent 2 }}"#), "  a\n  b\n\n  c");
    assert!(
        World::new()
            .err(r#"{{ "a" | indent -1 }}"#)
            .contains("positive integer")
    );
    assert!(
        World::new()
            .err(r#"{{ 1 | toLower }}"#)
            .contains("expected string, got int")
    );
}

#[test]
fn list_membership_functions() {
    let list = r#"(split "," "a,b,c")"#;
    assert_eq!(
        t(&format!(
            r#"{{{{ in {list} "b" }}}} {{{{ in {list} "z" }}}} {{{{ {list} | contains "c" }}}}"#
        )),
        "true false true"
    );
    assert_eq!(t(r#"{{ in "haystack" "st" }}"#), "true");
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsAll (split "," "a,b") }}}} {{{{ {list} | containsAll (split "," "a,z") }}}}"#
        )),
        "true false"
    );
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsAny (split "," "z,c") }}}} {{{{ {list} | containsAny (split "," "z") }}}}"#
        )),
        "true false"
    );
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsNone (split "," "z") }}}} {{{{ {list} | containsNotAll (split "," "a,z") }}}}"#
        )),
        "true true"
    );
}

#[test]
fn parse_functions() {
    assert_eq!(
        t(
            r#"{{ parseBool "true" }} {{ parseBool "" }} {{ parseInt "-42" }} {{ parseUint "7" }} {{ parseFloat "1.5" }} {{ parseInt "" }}"#
        ),
        "true false -42 7 1.5 0"
    );
    let e = World::new().err(r#"{{ parseInt "x" }}"#);
    assert!(e.contains("parseInt"), "{e}");
    assert!(
        World::new()
            .err(r#"{{ parseBool "yes" }}"#)
            .contains("parseBool")
    );
}

#[test]
fn arithmetic_functions() {
    // The piped value is the left operand: `a | subtract b` is a - b.
    assert_eq!(
        t(
            r#"{{ 5 | add 2 }} {{ 5 | subtract 2 }} {{ 5 | multiply 2 }} {{ 5 | divide 2 }} {{ 5 | modulo 2 }}"#
        ),
        "7 3 10 2 1"
    );
    assert_eq!(t(r#"{{ 5.0 | divide 2 }} {{ 1 | add 0.5 }}"#), "2.5 1.5");
    assert_eq!(
        t(r#"{{ 5 | minimum 2 }} {{ 5 | maximum 2 }} {{ minimum 1.5 3 }}"#),
        "2 5 1.5"
    );
    assert!(
        World::new()
            .err(r#"{{ 5 | divide 0 }}"#)
            .contains("division by zero")
    );
    assert!(
        World::new()
            .err(r#"{{ "a" | add 1 }}"#)
            .contains("add: unknown type")
    );
    assert_eq!(t(r#"{{ parseInt "10" | add 1 }}"#), "11");
}

#[test]
fn encoding_functions() {
    assert_eq!(
        t(r#"{{ "hi there" | base64Encode }} {{ "aGkgdGhlcmU=" | base64Decode }}"#),
        "aGkgdGhlcmU= hi there"
    );
    assert_eq!(
        t(r#"{{ "??>" | base64URLEncode }} {{ "Pz8-" | base64URLDecode }}"#),
        "Pz8- ??>"
    );
    assert!(
        World::new()
            .err(r#"{{ "!!" | base64Decode }}"#)
            .contains("base64Decode")
    );
    assert_eq!(
        t(r#"{{ "abc" | sha256Hex }}"#),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        t(r#"{{ "abc" | md5sum }}"#),
        "900150983cd24fb0d6963f7d28e17f72"
    );
}

#[test]
fn regex_functions() {
    assert_eq!(
        t(r#"{{ "v1.2.3" | regexMatch "^v[0-9]+" }} {{ "abc" | regexMatch "^z" }}"#),
        "true false"
    );
    assert_eq!(
        t(
            r##"{{ "a1b22" | regexReplaceAll "[0-9]+" "#" }} {{ "ab" | regexReplaceAll "(a)(b)" "$2$1" }}"##
        ),
        "a#b# ba"
    );
    assert!(
        World::new()
            .err(r#"{{ "a" | regexMatch "(" }}"#)
            .contains("regexMatch")
    );
}

#[test]
fn json_functions() {
    assert_eq!(
        t(r#"{{ parseJSON "{\"b\":[1,\"<x>\"],\"a\":null}" | toJSON }}"#),
        r#"{"a":null,"b":[1,"\u003cx\u003e"]}"#
    );
    assert_eq!(
        t(r#"{{ parseJSON "{\"a\":{\"b\":true},\"c\":[]}" | toJSONPretty }}"#),
        "{\n  \"a\": {\n    \"b\": true\n  },\n  \"c\": []\n}"
    );
    assert_eq!(
        t(r#"{{ (parseJSON "{\"n\":1.5}").n }} {{ len (parseJSON "") }}"#),
        "1.5 0"
    );
    let w = World::new().var("app/db", &[("user", "u1")]);
    assert_eq!(
        w.text(r#"{{ nomadVar "app/db" | toJSON }}"#),
        r#"{"user":"u1"}"#
    );
    assert!(
        World::new()
            .err(r#"{{ parseJSON "{" }}"#)
            .contains("parseJSON")
    );
    assert_eq!(
        t(r#"{{ parseJSON "[1e21, 1e-7, 0.5, -0]" | toJSON }}"#),
        "[1e+21,1e-7,0.5,-0]"
    );
}

#[test]
fn explode_map_nests_paths() {
    assert_eq!(
        t(r#"{{ (parseJSON "{\"a/b\":1,\"a/c\":2,\"d\":3}" | explodeMap) | toJSON }}"#),
        r#"{"a":{"b":1,"c":2},"d":3}"#
    );
    assert!(
        World::new()
            .err(r#"{{ parseJSON "{\"a\":1,\"a/b\":2}" | explodeMap }}"#)
            .contains("not a map")
    );
}

#[test]
fn timestamp_layouts() {
    let rfc = t("{{ timestamp }}");
    assert_eq!(rfc.len(), "2006-01-02T15:04:05Z".len(), "{rfc}");
    assert!(rfc.ends_with('Z'), "{rfc}");
    let day = t(r#"{{ timestamp "2006-01-02" }}"#);
    assert_eq!(day, rfc[..10]);
    assert!(t(r#"{{ timestamp "unix" }}"#).parse::<i64>().is_ok());
    assert!(
        World::new()
            .err(r#"{{ timestamp "a" "b" }}"#)
            .contains("wrong number of arguments")
    );
}

#[test]
fn unescaped_json_and_split_to_map() {
    assert_eq!(
        t(r#"{{ parseJSON "{\"a\":\"<&>\"}" | toUnescapedJSON }}"#),
        r#"{"a":"<&>"}"#
    );
    assert_eq!(
        t(r#"{{ parseJSON "[1]" | toUnescapedJSONPretty }}"#),
        "[\n  1\n]"
    );
    assert_eq!(
        t(r#"{{ range $k, $v := "a=1,b=2,c" | splitToMap "," "=" }}{{ $k }}{{ $v }}{{ end }}"#),
        "a1b2"
    );
    assert_eq!(t(r#"{{ len ("  " | splitToMap "," "=") }}"#), "0");
}
