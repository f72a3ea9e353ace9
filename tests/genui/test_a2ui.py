"""A2UI streams against the official schemas (from @a2ui/web_core) and the catalog checks."""

from __future__ import annotations

import json
import subprocess

import pytest

from mol.genui.a2ui import check_a2ui

from .conftest import DATA, components, create, data, lines

ROOT_TEXT = {"id": "root", "component": "Text", "text": "Hello"}


def problems(text, schemas):
    result = check_a2ui(text, schemas)
    return [(p.rule, p.where, p.message) for p in result.problems]


def test_the_sample_stream_is_valid(schemas):
    result = check_a2ui((DATA / "booking.jsonl").read_text(), schemas)
    assert result.valid, result.problems
    assert result.version == "v0.9"
    assert [next(k for k in m if k != "version") for m in result.messages] == [
        "createSurface", "updateDataModel", "updateComponents"]


@pytest.mark.parametrize("folder", ["v0_9", "v1_0"])
def test_every_official_example_is_valid(chain, schemas, folder):
    """No false alarms: the examples @a2ui/web_core ships for each version pass."""
    examples = sorted((chain.a2ui_schemas() / folder / "schemas/catalogs/basic/examples")
                      .glob("*.json"))
    assert len(examples) > 30
    for path in examples:
        messages = json.loads(path.read_text())["messages"]
        result = check_a2ui(lines(*messages), schemas)
        assert result.valid, (path.name, [str(p) for p in result.problems])


def test_a_json_list_and_a_single_message_are_streams_too(schemas):
    listed = json.dumps([create(), components(ROOT_TEXT)], indent=2)
    assert check_a2ui(listed, schemas).valid
    assert check_a2ui(json.dumps(create()), schemas).valid


def test_a_schema_violation_names_the_line_and_pointer(schemas):
    found = problems(lines(create(), components({"id": "root", "component": "Text",
                                                 "text": 5})), schemas)
    assert found == [("schema", "line 2 /updateComponents/components/0/text",
                      "5 matches none of the allowed forms (closest: 5 is not of type 'string')")]


def test_a_missing_required_property_and_an_unknown_one(schemas):
    found = problems(lines(create(), components(
        {"id": "root", "component": "Button", "child": "label"},
        {"id": "label", "component": "Text", "text": "Go", "colour": "red"})), schemas)
    assert ("schema", "line 2 /updateComponents/components/0",
            "'action' is a required property") in found
    unknown = [f for f in found if f[1] == "line 2 /updateComponents/components/1"]
    assert len(unknown) == 1 and "'colour'" in unknown[0][2] and "text" in unknown[0][2]
    assert len(found) == 2  # the declared properties are not reported as unexpected


def test_an_envelope_violation(schemas):
    message = {"version": "v0.9", "createSurface": {"surfaceId": "s"}}
    assert problems(lines(message), schemas) == [
        ("schema", "line 1 /createSurface", "'catalogId' is a required property")]


def test_an_unknown_component_type(schemas):
    found = problems(lines(create(), components({"id": "root", "component": "Carousel"})),
                     schemas)
    assert len(found) == 1
    rule, where, message = found[0]
    assert (rule, where) == ("unknown-component",
                             "line 2 /updateComponents/components/0/component")
    assert "'Carousel'" in message and "Column" in message


def test_a_dangling_child(schemas):
    found = problems(lines(create(), components(
        {"id": "root", "component": "Column", "children": ["a", "ghost"]},
        {"id": "a", "component": "Text", "text": "hi"})), schemas)
    assert found == [("dangling-child", "line 2 /updateComponents/components/0/children/1",
                      "child 'ghost' is not a component of surface 's'")]


def test_dangling_children_in_nested_properties_and_templates(schemas):
    found = problems(lines(create(), data({"rows": [{"t": "x"}]}), components(
        {"id": "root", "component": "Tabs", "tabs": [{"title": "A", "child": "list"},
                                                     {"title": "B", "child": "nowhere"}]},
        {"id": "list", "component": "List", "children": {"componentId": "row",
                                                         "path": "/rows"}})), schemas)
    wheres = sorted(where for _, where, _ in found)
    assert wheres == ["line 3 /updateComponents/components/0/tabs/1/child",
                      "line 3 /updateComponents/components/1/children/componentId"]


def test_a_component_containing_itself(schemas):
    found = problems(lines(create(), components({"id": "root", "component": "Card",
                                                 "child": "root"})), schemas)
    assert [rule for rule, _, _ in found] == ["dangling-child"]
    assert "cannot contain itself" in found[0][2]


def test_no_root(schemas):
    found = problems(lines(create(), components({"id": "main", "component": "Text",
                                                 "text": "x"})), schemas)
    assert found == [("dangling-child", "line 1", "surface 's' has no component with id 'root'")]


def test_a_binding_to_missing_data(schemas):
    found = problems(lines(create(), components(
        {"id": "root", "component": "Text", "text": {"path": "/user/name"}})), schemas)
    assert found == [("missing-data", "line 2 /updateComponents/components/0/text",
                      "binds to '/user/name', which the data model does not have: set it "
                      "with updateDataModel first")]


def test_bindings_that_resolve_and_inputs_that_write(schemas):
    """Data set before or after the components, paths inside templates relative to each
    item, and an input's own value (written by the user) are all fine."""
    stream = lines(create(), components(
        {"id": "root", "component": "Column", "children": ["who", "items", "name", "echo"]},
        {"id": "who", "component": "Text", "text": {"path": "/user/name"}},
        {"id": "items", "component": "List", "children": {"componentId": "item",
                                                          "path": "/items"}},
        {"id": "item", "component": "Text", "text": {"path": "title"}},
        {"id": "name", "component": "TextField", "label": "Name",
         "value": {"path": "/form/name"}},
        {"id": "echo", "component": "Text", "text": {"path": "/form/name"}}),
        data({"user": {"name": "Ada"}, "items": [{"title": "one"}, {"title": "two"}]}))
    assert problems(stream, schemas) == []
    broken = stream.replace('"title": "two"', '"name": "two"')
    assert [rule for rule, _, _ in problems(broken, schemas)] == ["missing-data"]


def test_surfaces_must_exist_once(schemas):
    found = problems(lines(components(ROOT_TEXT), create(), create(),
                           {"version": "v0.9", "deleteSurface": {"surfaceId": "t"}}), schemas)
    assert [(rule, where) for rule, where, _ in found] == [
        ("surface", "line 1 /updateComponents/surfaceId"),
        ("surface", "line 3 /createSurface/surfaceId"),
        ("surface", "line 4 /deleteSurface/surfaceId")]


def test_an_unknown_catalog(schemas):
    found = problems(lines(create(catalog="https://example.com/mine.json")), schemas)
    assert [(rule, where) for rule, where, _ in found] == [
        ("surface", "line 1 /createSurface/catalogId")]


def test_versions(schemas):
    assert problems(lines({"createSurface": {"surfaceId": "s"}}), schemas) == [
        ("version", "line 1 /version",
         "'version' is None; expected one of 'v0.9', 'v0.9.1', 'v1.0'")]
    mixed = lines(create(), {"version": "v1.0", "deleteSurface": {"surfaceId": "s"}})
    assert problems(mixed, schemas) == [
        ("version", "line 2 /version", "the stream declared 'v0.9' first; every message must "
         "keep its protocol ('v0.9' or 'v0.9.1'), not 'v1.0'")]
    # v0.9 and v0.9.1 are one protocol: the renderer takes either on every message.
    assert problems(lines(create(), {**components(ROOT_TEXT), "version": "v0.9.1"}),
                    schemas) == []


def test_a_v0_9_1_stream_is_valid_and_a_broken_one_gets_precise_errors(schemas):
    result = check_a2ui((DATA / "rsvp-v0.9.1.jsonl").read_text(), schemas)
    assert result.valid, result.problems
    assert result.version == "v0.9.1"
    broken = [json.loads(line) for line in (DATA / "rsvp-v0.9.1.jsonl").read_text().split("\n")
              if line]
    broken[1]["version"] = "v0.9.2"
    assert problems(lines(*broken), schemas) == [
        ("version", "line 2 /version",
         "'version' is 'v0.9.2'; expected one of 'v0.9', 'v0.9.1', 'v1.0'")]
    broken[1]["version"] = "v0.9.1"
    del broken[2]["updateComponents"]["components"][4]["action"]
    broken[2]["updateComponents"]["components"][2]["text"] = {"path": "/where"}
    assert problems(lines(*broken), schemas) == [
        ("schema", "line 3 /updateComponents/components/4", "'action' is a required property"),
        ("missing-data", "line 3 /updateComponents/components/2/text",
         "binds to '/where', which the data model does not have: set it with updateDataModel "
         "first")]


def test_the_versions_are_the_packages_own(chain, schemas):
    """The checker's versions are what the installed packages define: for the folder the
    renderer reads, the version enum of the renderer's own message schema, read afresh from
    the package here (the file setup wrote must still agree); for the others, the schema's.
    And the two sources agree: every version the official JSON Schema allows, the renderer
    accepts."""
    fresh = subprocess.run([chain.node, chain.script("renderer.mjs"), str(chain.home), "-"],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(fresh) == json.loads(chain.a2ui_renderer().read_text())
    renderers = {r["folder"]: r["messages"] for r in json.loads(fresh)["renderers"].values()}
    assert renderers["v0_9"]["createSurface"] == ["v0.9", "v0.9.1"]
    for folder, protocol in schemas.protocols.items():
        stream = json.loads((chain.a2ui_schemas() / folder / "schemas" / protocol.stream)
                            .read_text())
        for key, name in protocol.messages.items():
            version = stream["$defs"][name]["properties"]["version"]
            spec = [version["const"]] if "const" in version else version["enum"]
            accepted = renderers[folder][key] if folder in renderers else spec
            assert list(protocol.accepts[key]) == accepted, (folder, key)
            assert set(spec) <= set(accepted), (folder, key, spec, accepted)
    assert list(schemas.versions) == ["v0.9", "v0.9.1", "v1.0"]
    assert {f: list(p.messages) for f, p in schemas.protocols.items()} == {
        "v0_9": ["createSurface", "updateComponents", "updateDataModel", "deleteSurface"],
        "v1_0": ["createSurface", "updateComponents", "updateDataModel", "deleteSurface",
                 "callRendererFunction", "agentFunctionResponse"]}


def test_v1_surfaces_carry_components_and_data(schemas):
    basic = "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json"
    stream = lines({"version": "v1.0", "createSurface": {
        "surfaceId": "s", "catalogId": basic, "dataModel": {"name": "Ada"},
        "components": [{"id": "root", "component": "Text", "text": {"path": "/name"}}]}})
    assert problems(stream, schemas) == []
    broken = stream.replace('"/name"', '"/nobody"')
    assert [rule for rule, _, _ in problems(broken, schemas)] == ["missing-data"]


def test_json_errors_name_line_and_column(schemas):
    stream = lines(create()) + '{"version": "v0.9", "updateComponents": \n'
    assert problems(stream, schemas) == [
        ("json", "line 2, column 41", "not valid JSON: Expecting value")]
    assert problems("[1, 2", schemas)[0][0:2] == ("json", "line 1, column 6")


def test_message_types(schemas):
    two = {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": "x"},
           "deleteSurface": {"surfaceId": "s"}}
    none = {"version": "v0.9", "hello": {}}
    found = problems(lines(two, none), schemas)
    assert [(rule, where) for rule, where, _ in found] == [("schema", "line 1"),
                                                           ("schema", "line 2")]
    assert "several message types" in found[0][2] and "no message type" in found[1][2]


def test_the_envelope_of_a_component_is_its_versions_own(schemas):
    """Each version's own envelope: v1.0's ``ComponentCommon`` has ``metadata``, v0.9's does
    not, so a v0.9 component carrying it is refused and named (a list kept by hand over both
    versions let it pass)."""
    basic = "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json"
    tagged = {"id": "root", "component": "Text", "text": "Hi", "metadata": {}}
    assert problems(lines({"version": "v1.0", "createSurface": {
        "surfaceId": "s", "catalogId": basic, "components": [tagged]}}), schemas) == []
    [(rule, where, message)] = problems(lines(create(), components(tagged)), schemas)
    assert (rule, where) == ("schema", "line 2 /updateComponents/components/0")
    assert message == ("unexpected properties 'metadata': a Text has accessibility, id, text, "
                       "variant, weight")
