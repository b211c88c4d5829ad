from pathlib import Path

import yaml


def test_ports_are_a_mapping_of_numbers():
    data = yaml.safe_load(Path("/app/ports.yaml").read_text())
    assert data == {"web": 8080, "db": 5432, "cache": 6379}
