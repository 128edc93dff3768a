#!/usr/bin/env python3
"""Validate JSON files against the helper's schema (rust/spec.schema.json), standard library only.

    schema-check.py SCHEMA FILE...

Implements the JSON Schema keywords that schema uses (type, properties, required,
additionalProperties, items, anyOf, $ref into $defs, minimum, format uint32) and refuses any
other keyword, so a schema change cannot make this check silently weaker. Prints one line per
problem; exit status 1 when a file does not match.
"""

import json
import sys

ANNOTATIONS = {"$schema", "title", "description", "default", "examples", "$defs"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class UnknownKeyword(Exception):
    pass


def errors(schema, value, root, where):
    """All problems of `value` against `schema`, as strings."""
    if schema is True:
        return []
    if schema is False:
        return [f"{where}: no value is allowed here"]
    out = []
    for key in schema:
        if key not in ANNOTATIONS | {
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "anyOf",
            "$ref",
            "minimum",
            "format",
        }:
            raise UnknownKeyword(key)
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise UnknownKeyword("$ref " + ref)
        out += errors(root["$defs"][ref[len("#/$defs/") :]], value, root, where)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            return out + [f"{where}: {json.dumps(value)} is not of type {' or '.join(types)}"]
    if "anyOf" in schema:
        if all(errors(s, value, root, where) for s in schema["anyOf"]):
            out.append(f"{where}: {json.dumps(value)} matches none of the alternatives")
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        out.append(f"{where}: {value} is below {schema['minimum']}")
    if schema.get("format") == "uint32" and TYPES["integer"](value) and not 0 <= value < 2**32:
        out.append(f"{where}: {value} is not a uint32")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{where}: required field {key} is missing")
        for key, v in value.items():
            if key in props:
                out += errors(props[key], v, root, f"{where}.{key}")
            elif "additionalProperties" in schema:
                out += errors(schema["additionalProperties"], v, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += errors(schema["items"], v, root, f"{where}[{i}]")
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        schema = json.load(f)
    status = 0
    for path in argv[2:]:
        with open(path) as f:
            value = json.load(f)
        try:
            problems = errors(schema, value, schema, "$")
        except UnknownKeyword as e:
            print(f"{argv[1]}: keyword {e} is not implemented by {argv[0]}; extend it", file=sys.stderr)
            return 2
        for p in problems:
            print(f"{path}: {p}")
        if problems:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
