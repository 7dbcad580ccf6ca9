"""Every refusal in clients/error-mapping.tsv, the table all clients' tests share, raises the exception
its python column names."""

from pathlib import Path
from typing import cast

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

import workqueue_sidecar
from workqueue_sidecar.errors import Service, WorkqueueError, from_rpc_error

TABLE = Path(__file__).resolve().parents[2] / "error-mapping.tsv"


def _rows() -> list[tuple[int, list[str]]]:
    rows = []
    for number, line in enumerate(TABLE.read_text().splitlines(), start=1):
        if line and not line.startswith("#"):
            fields = line.split("\t")
            assert len(fields) == 8, f"error-mapping.tsv:{number}: {len(fields)} fields, want 8"
            rows.append((number, fields))
    assert rows, "error-mapping.tsv has no lines"
    return rows


@pytest.mark.parametrize(("number", "fields"), _rows(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_a_refusal_should_raise_the_exception_the_shared_table_names(number: int, fields: list[str]) -> None:
    service, code_name, domain, reason, _go, expected, _typescript, _java = fields
    assert service in ("queue", "cache", "object"), f"error-mapping.tsv:{number}: unknown service {service}"
    code = grpc.StatusCode[code_name]
    status = status_pb2.Status(code=code.value[0], message="refused")
    if domain != "-":
        status.details.add().Pack(error_details_pb2.ErrorInfo(domain=domain, reason=reason))
    trailer = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    raised = from_rpc_error(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailer, details="refused"), cast(Service, service))
    expected_class = getattr(workqueue_sidecar, expected)
    assert isinstance(expected_class, type) and issubclass(expected_class, WorkqueueError), expected
    assert type(raised) is expected_class, f"error-mapping.tsv:{number}: {type(raised).__name__}, want {expected}"
    assert raised.code == code
