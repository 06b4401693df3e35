"""Page-number pagination whose bad parameters are 400s naming them (DRF answers a page past
the end with a bare 404 and quietly replaces a page size it cannot use by the default)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import InvalidPage
from django.core.paginator import Paginator as DjangoPaginator
from django.utils.functional import cached_property
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination

from core.exceptions import ApplicationError


class CountedPaginator(DjangoPaginator):
    """Django's paginator, which takes a list's size from `known_count` on the queryset when
    its view knows it cheaper than a COUNT (see runs.api.views)."""

    @cached_property
    def count(self) -> int:
        known = getattr(self.object_list, "known_count", None)
        return int(known) if known is not None else super().count


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000
    django_paginator_class = CountedPaginator

    def get_page_size(self, request: Any) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return int(self.page_size or 50)
        size = _positive(raw)
        if size is None or size > self.max_page_size:
            raise ApplicationError(
                f"page_size must be a whole number from 1 to {self.max_page_size}; got {raw!r}",
                field=self.page_size_query_param,
            )
        return size

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and raw not in self.last_page_strings and _positive(raw) is None:
            raise ApplicationError(
                f"page must be a whole number from 1 (or 'last'); got {raw!r}",
                field=self.page_query_param,
            )
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound as exc:  # DRF's answer to the paginator's InvalidPage
            if not isinstance(exc.__context__, InvalidPage):
                raise
            pages = self.django_paginator_class(queryset, self.get_page_size(request)).num_pages
            raise ApplicationError(
                f"page {raw} is past the last page ({pages}); ask for page 1 to {pages}",
                field=self.page_query_param,
                details={"pages": pages},
            ) from exc


def _positive(raw: str) -> int | None:
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 1 else None
