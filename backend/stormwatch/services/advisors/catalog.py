"""The shipped pricing catalog and how an org's own figures override it.

Shipped figures are data of a release: each carries the date it took effect and the public
page it was read from. They were transcribed from the providers' list-price pages as they
stood on CATALOG_DATE (first tier, on-demand, USD); prices change, so an org should check
them and override what differs (its overrides live in the database, keyed by provider, region
and item, and so survive any later update of this file). CPU is priced per vCPU-hour: the
general-purpose 2-vCPU instance's hourly price divided by 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

ITEMS = ("egress_inter_region_per_gb", "egress_internet_per_gb", "storage_per_gb_month",
         "put_per_1k", "get_per_1k", "list_per_1k", "cpu_per_hour")
ITEM_DESCRIPTIONS = {
    "egress_inter_region_per_gb": "data transfer to another region of the provider, USD/GB",
    "egress_internet_per_gb": "data transfer out to the internet, USD/GB (first tier)",
    "storage_per_gb_month": "object storage, standard/hot class, USD per GB-month",
    "put_per_1k": "PUT (write) requests, USD per 1,000",
    "get_per_1k": "GET (read) requests, USD per 1,000",
    "list_per_1k": "LIST requests, USD per 1,000",
    "cpu_per_hour": "one vCPU of a general-purpose VM, USD per hour",
}
CATALOG_DATE = date(2024, 6, 1)
# Storage-target providers map onto the cloud that bills them.
TARGET_PROVIDER = {"s3": "aws", "azure": "azure", "gcs": "gcp"}

_AWS_S3 = "AWS, 'Amazon S3 pricing' (aws.amazon.com/s3/pricing), as listed 2024-06"
_AWS_EC2 = ("AWS, 'Amazon EC2 On-Demand Pricing'"
            " (aws.amazon.com/ec2/pricing/on-demand), m5.large / 2, as listed 2024-06")
_AWS_DT = "AWS, 'Amazon EC2 On-Demand Pricing', Data Transfer section, as listed 2024-06"
_AZ_BLOB = ("Microsoft, 'Azure Blob Storage pricing'"
            " (azure.microsoft.com/pricing/details/storage/blobs), hot LRS, as listed 2024-06")
_AZ_VM = ("Microsoft, 'Linux Virtual Machines Pricing'"
          " (azure.microsoft.com/pricing/details/virtual-machines/linux), D2s v5 / 2,"
          " as listed 2024-06")
_AZ_BW = ("Microsoft, 'Bandwidth pricing'"
          " (azure.microsoft.com/pricing/details/bandwidth), as listed 2024-06")
_GCP_GCS = ("Google, 'Cloud Storage pricing'"
            " (cloud.google.com/storage/pricing), Standard, Class A/B,"
            " as listed 2024-06")
_GCP_CE = ("Google, 'VM instance pricing'"
           " (cloud.google.com/compute/vm-instance-pricing), e2-standard-2 / 2,"
           " as listed 2024-06")
_GCP_NET = ("Google, 'Network pricing'"
            " (cloud.google.com/vpc/network-pricing), Premium tier, as listed 2024-06")


@dataclass(frozen=True)
class Figure:
    provider: str
    region: str
    item: str
    price_usd: float
    effective_date: date
    source: str


def _region(provider: str, region: str, prices: dict[str, float],
            sources: dict[str, str]) -> list[Figure]:
    return [Figure(provider, region, item, prices[item], CATALOG_DATE, sources[item])
            for item in ITEMS]


def _aws(region: str, inter: float, internet: float, storage: float, put: float, get: float,
         vm_hour: float) -> list[Figure]:
    return _region("aws", region, {
        "egress_inter_region_per_gb": inter, "egress_internet_per_gb": internet,
        "storage_per_gb_month": storage, "put_per_1k": put, "get_per_1k": get,
        "list_per_1k": put, "cpu_per_hour": vm_hour / 2}, {
        "egress_inter_region_per_gb": _AWS_DT, "egress_internet_per_gb": _AWS_DT,
        "storage_per_gb_month": _AWS_S3, "put_per_1k": _AWS_S3, "get_per_1k": _AWS_S3,
        "list_per_1k": _AWS_S3 + " (LIST is billed with PUT/COPY/POST)",
        "cpu_per_hour": _AWS_EC2})


def _azure(region: str, inter: float, internet: float, storage: float, write_10k: float,
           read_10k: float, list_10k: float, vm_hour: float) -> list[Figure]:
    return _region("azure", region, {
        "egress_inter_region_per_gb": inter, "egress_internet_per_gb": internet,
        "storage_per_gb_month": storage, "put_per_1k": write_10k / 10,
        "get_per_1k": read_10k / 10, "list_per_1k": list_10k / 10,
        "cpu_per_hour": vm_hour / 2}, {
        "egress_inter_region_per_gb": _AZ_BW, "egress_internet_per_gb": _AZ_BW,
        "storage_per_gb_month": _AZ_BLOB,
        "put_per_1k": _AZ_BLOB + " (write operations per 10,000 / 10)",
        "get_per_1k": _AZ_BLOB + " (read operations per 10,000 / 10)",
        "list_per_1k": _AZ_BLOB + " (list operations per 10,000 / 10)", "cpu_per_hour": _AZ_VM})


def _gcp(region: str, inter: float, internet: float, storage: float, vm_hour: float
         ) -> list[Figure]:
    return _region("gcp", region, {
        "egress_inter_region_per_gb": inter, "egress_internet_per_gb": internet,
        "storage_per_gb_month": storage, "put_per_1k": 0.005, "get_per_1k": 0.0004,
        "list_per_1k": 0.005, "cpu_per_hour": vm_hour / 2}, {
        "egress_inter_region_per_gb": _GCP_NET, "egress_internet_per_gb": _GCP_NET,
        "storage_per_gb_month": _GCP_GCS, "put_per_1k": _GCP_GCS + " (Class A)",
        "get_per_1k": _GCP_GCS + " (Class B)", "list_per_1k": _GCP_GCS + " (Class A)",
        "cpu_per_hour": _GCP_CE})


SHIPPED: list[Figure] = [
    *_aws("us-east-1", 0.02, 0.09, 0.023, 0.005, 0.0004, 0.096),
    *_aws("us-west-2", 0.02, 0.09, 0.023, 0.005, 0.0004, 0.096),
    *_aws("eu-west-1", 0.02, 0.09, 0.023, 0.005, 0.0004, 0.107),
    *_aws("eu-central-1", 0.02, 0.09, 0.0245, 0.0054, 0.00043, 0.115),
    *_aws("ap-northeast-2", 0.08, 0.126, 0.025, 0.0045, 0.00035, 0.118),
    *_aws("ap-south-1", 0.086, 0.1093, 0.025, 0.005, 0.0004, 0.101),
    *_aws("ap-southeast-1", 0.09, 0.12, 0.025, 0.005, 0.0004, 0.12),
    *_aws("sa-east-1", 0.138, 0.15, 0.0405, 0.007, 0.00056, 0.153),
    *_azure("eastus", 0.02, 0.087, 0.018, 0.05, 0.004, 0.05, 0.096),
    *_azure("westeurope", 0.02, 0.087, 0.0196, 0.065, 0.005, 0.065, 0.104),
    *_azure("koreacentral", 0.08, 0.12, 0.0209, 0.065, 0.005, 0.065, 0.118),
    *_gcp("us-central1", 0.02, 0.12, 0.020, 0.067),
    *_gcp("europe-west1", 0.02, 0.12, 0.020, 0.074),
    *_gcp("asia-northeast3", 0.08, 0.12, 0.023, 0.086),
]


def shipped_index(figures: list[Figure] | None = None) -> dict[tuple[str, str, str], Figure]:
    """The newest shipped figure per (provider, region, item) in effect today."""
    today = date.today()
    out: dict[tuple[str, str, str], Figure] = {}
    for f in figures if figures is not None else SHIPPED:
        if f.effective_date > today:
            continue
        key = (f.provider, f.region, f.item)
        if key not in out or out[key].effective_date < f.effective_date:
            out[key] = f
    return out


def known_regions() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in SHIPPED:
        out.setdefault(f.provider, set()).add(f.region)
    return out
