"""Renders ``docs/api.md`` from the OpenAPI schema the server serves at ``/openapi.json``.

    .venv/bin/python docs/generate_api.py            # rewrite docs/api.md
    .venv/bin/python docs/generate_api.py --check    # exit 1 if docs/api.md is stale

The schema (:func:`linkstream.api.openapi.openapi_schema`) is the contract; this page is
only its rendering, so edit the schema and regenerate, never the page.
``tests/test_api_doc.py`` fails when the committed page differs from this script's output.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from linkstream.api.openapi import openapi_schema

API_MD = Path(__file__).resolve().parent / "api.md"
REGENERATE = ".venv/bin/python docs/generate_api.py"

_METHODS = ("get", "post", "put", "patch", "delete", "head", "options")


def _cell(text: Any) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _schema(schema: dict[str, Any] | None) -> str:
    """A short type expression of a JSON schema: ``string``, ``array of QuerySummary``..."""
    if not schema:
        return ""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{_slug(name)})"
    if "oneOf" in schema:
        return " or ".join(_schema(sub) for sub in schema["oneOf"])
    if "allOf" in schema:
        return " + ".join(_schema(sub) for sub in schema["allOf"])
    kind = schema.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        return f"array of {_schema(schema.get('items')) or 'any'}"
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        fields = ", ".join(
            f"`{name}`{'' if name in required else '?'}: {_schema(sub)}"
            for name, sub in schema["properties"].items()
        )
        return f"object {{{fields}}}"
    out = str(kind)
    if "enum" in schema:
        out += " (" + ", ".join(f"`{v}`" for v in schema["enum"]) + ")"
    if "pattern" in schema:
        out += f" matching `{schema['pattern']}`"
    return out


def _merged(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the properties and required fields of its ``allOf`` parts folded in."""
    if "allOf" not in schema:
        return schema
    props: dict[str, Any] = {}
    required: list[str] = []
    for part in schema["allOf"]:
        if "$ref" in part:
            part = schemas.get(_ref_name(part["$ref"]), {})
        part = _merged(part, schemas)
        props.update(part.get("properties", {}))
        required += part.get("required", [])
    return {"properties": props, "required": required}


def _operation(path: str, method: str, op: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    out = [f"### `{method.upper()} {path}`", "", _cell(op.get("summary", "")), ""]
    if op.get("description"):
        out += [_cell(op["description"]), ""]
    security = op.get("security", doc.get("security", []))
    if "x-required-scope" in op:
        out.append(f"Required scope: `{op['x-required-scope']}`.")
    elif security == []:
        out.append("Required scope: none (no token needed).")
    else:
        scopes = sorted({s for req in security for v in req.values() for s in v})
        out.append("Required scope: " + (", ".join(f"`{s}`" for s in scopes) or "any valid token") + ".")
    out.append("")

    params = op.get("parameters", [])
    if params:
        out += ["Parameters:", "", "| name | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            out.append(
                f"| `{p['name']}` | {p['in']} | {_cell(_schema(p.get('schema')))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
            )
        out.append("")

    body = op.get("requestBody")
    if body:
        required = "required" if body.get("required") else "optional"
        out += [f"Request body ({required}):", "", "| media type | schema |", "|---|---|"]
        for media, content in body.get("content", {}).items():
            out.append(f"| `{media}` | {_cell(_schema(content.get('schema')))} |")
        out.append("")

    out += ["Responses:", "", "| status | description | content |", "|---|---|---|"]
    for status, resp in sorted(op.get("responses", {}).items()):
        content = "; ".join(
            f"`{media}` {_schema(c.get('schema'))}".strip() for media, c in resp.get("content", {}).items()
        )
        out.append(f"| {status} | {_cell(resp.get('description', ''))} | {_cell(content)} |")
    out.append("")
    return out


def render(doc: dict[str, Any] | None = None) -> str:
    """The Markdown page of the OpenAPI document ``doc`` (default: the served schema)."""
    doc = openapi_schema() if doc is None else doc
    info = doc.get("info", {})
    out = [
        f"# {info.get('title', 'API')} HTTP API",
        "",
        "<!-- Generated by docs/generate_api.py from linkstream.api.openapi.openapi_schema(); "
        f"do not edit. Regenerate: {REGENERATE} -->",
        "",
        f"OpenAPI {doc.get('openapi', '')}, API version {info.get('version', '')}. "
        + _cell(info.get("description", "")),
        "",
        "This page is generated from the schema every server (`linkstream run`, and every "
        "coordinator of a cluster) serves at `/openapi.json`; that document is the contract.",
        "",
        "## Authentication",
        "",
    ]
    for name, scheme in doc.get("components", {}).get("securitySchemes", {}).items():
        out += [
            f"`{name}`: {scheme.get('type', '')} `{scheme.get('scheme', '')}`. "
            + _cell(scheme.get("description", "")),
            "",
        ]

    out += ["## Operations", "", "| method | path | summary | scope |", "|---|---|---|---|"]
    ops = [
        (path, method, op)
        for path, item in doc.get("paths", {}).items()
        for method, op in item.items()
        if method in _METHODS
    ]
    for path, method, op in ops:
        scope = op.get("x-required-scope", "none" if op.get("security") == [] else "")
        anchor = _slug(f"{method.upper()} {path}")
        out.append(
            f"| {method.upper()} | [`{path}`](#{anchor}) | {_cell(op.get('summary', ''))} | `{scope}` |"
        )
    out.append("")
    for path, method, op in ops:
        out += _operation(path, method, op, doc)

    schemas = doc.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name, schema in schemas.items():
            out += [f"### {name}", ""]
            if schema.get("description"):
                out += [_cell(schema["description"]), ""]
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            schema = _merged(schema, schemas)
            required = set(schema.get("required", []))
            for field, sub in schema.get("properties", {}).items():
                out.append(
                    f"| `{field}` | {_cell(_schema(sub))} | {'yes' if field in required else 'no'} | "
                    f"{_cell(sub.get('description', ''))} |"
                )
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/api.md from the OpenAPI schema.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md differs, write nothing")
    parser.add_argument("--out", type=Path, default=API_MD, help="output file (default: docs/api.md)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale; regenerate it with: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
