"""The options a study's prepare steps may give each utility: an allow-list, through the API."""

import json

import pytest

from studies.models import Study
from studies.spec import SPEC_SCHEMA
from studies.utility_options import UTILITIES

AIRFOIL = {"name": "prep", "template": "airfoil2d", "parameters": {"aoa": 2, "speed": 20}}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        # a library of the case, a file of the host
        (["checkMesh", "-lib", '("/case/x.so")'], "option -lib is not allowed (it loads"),
        (["blockMesh", "-dict", "/etc/passwd"], "option -dict takes a path relative to the case"),
        (["blockMesh", "-dict", "system/../../etc/passwd"], "a path inside the case"),
        (["blockMesh", "-dict", "$FOAM_CASE/../x"], "option -dict takes a path"),
        (["checkMesh", "-libs", "(x)"], "option -libs is not allowed"),
        (["setFields", "-case", "/tmp/other"], "option -case is not allowed"),
        (["checkMesh", "--case", "/tmp/other"], "option --case is not allowed"),
        (["snappyHexMesh", "-fileHandler", "collated"], "option -fileHandler is not allowed"),
        (["createPatch", "-roots", "(/tmp)"], "option -roots is not allowed"),
        (["topoSet", "-hostRoots", "((h /tmp))"], "option -hostRoots is not allowed"),
        (["checkMesh", "-info-switch", "allowSystemOperations=1"], "-info-switch is not allowed"),
        (["checkMesh", "-parallel"], "option -parallel is not allowed"),
        (["blockMesh", "-doc"], "option -doc is not allowed (it starts a browser)"),
        (["transformPoints", "-translate", "(1 0"], "takes a number, or numbers in parentheses"),
        (["topoSet", "-time", "../x"], "takes times"),
        (["blockMesh", "-region", "../x"], "takes a name"),
        (["mapFields", "/tmp/source"], "the source case (a folder inside this case) must be"),
        (["setFields", "extra"], "'extra' is not an option of setFields"),
        (["blockMesh", "-dict"], "option -dict needs a value"),
    ],
)
def test_a_prepare_option_off_its_utilitys_list_is_a_400_naming_step_and_option(api, argv, needle):
    prepare: list[list[str]] = [["blockMesh"], argv]
    spec = {**AIRFOIL, "prepare": prepare}
    for path in ("/api/v1/studies/preview/", "/api/v1/studies/"):
        r = api.post(path, spec, format="json")
        assert r.status_code == 400, r.json()
        body = r.json()
        assert body["field"] == "prepare[1]", body
        assert body["message"].startswith(f"prepare[1] ({argv[0]}): "), body
        assert needle in body["message"], body
    assert Study.objects.count() == 0


def test_the_message_says_what_the_utility_takes(api):
    spec = {**AIRFOIL, "prepare": [["checkMesh", "-lib", "x"]]}
    message = api.post("/api/v1/studies/", spec, format="json").json()["message"]
    assert "checkMesh takes: -allGeometry, -allTopology, -constant" in message
    assert "-time <value>" in message and "-lib" not in message.split("takes:")[1]


def test_options_on_the_lists_are_accepted(api):
    prepare = [
        ["blockMesh", "-dict", "system/blockMeshDict"],
        ["transformPoints", "-scale", "(0.001 0.001 0.001)", "-rotateFields"],
        ["topoSet", "-time", "0:10,20", "-noZero"],
        ["checkMesh", "-allTopology", "-allGeometry", "-writeSets", "vtk"],
        ["snappyHexMesh", "-overwrite", "-patches", "(inlet outlet)"],
        ["mapFields", "coarse", "-consistent", "-sourceTime", "latestTime"],
        ["setFields", "-region", "fluid", "-dict", "./system/setFieldsDict"],
    ]
    r = api.post("/api/v1/studies/", {**AIRFOIL, "prepare": prepare}, format="json")
    assert r.status_code == 201, r.json()


def test_every_utility_the_schema_allows_has_its_options_listed():
    schema = json.loads(SPEC_SCHEMA.read_text())
    assert set(schema["$defs"]["PrepareUtility"]["enum"]) == set(UTILITIES)
