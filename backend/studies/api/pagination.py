"""A study's runs in their own order, unfiltered, a page at a time without counting or
skipping rows: the runs page of a 100,000-run study, first page or last, costs its page.

A study's run indexes run 0, 1, … n−1 without gaps (submission numbers them from 0, an
extension from the last one + 1, and a run is never deleted on its own: only with its
study), and `Study.run_count` is n. So the count is the study's, and page p is the index
range [(p−1)·size, p·size), read from the (study, index) index instead of an OFFSET.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from core.pagination import Pagination
from studies.models import Run, Study


class IndexRangePaginator(Paginator):
    def __init__(self, object_list: Any, per_page: int, *, count: int, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self._known_count = count

    @cached_property
    def count(self) -> int:
        return self._known_count

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        runs: QuerySet[Run] = self.object_list  # type: ignore[assignment]
        rows = runs.filter(index__gte=bottom, index__lt=bottom + self.per_page)
        return Page(list(rows), number, self)


def study_runs_pagination(study: Study) -> Pagination:
    """The API's pagination (its 400s, its page size), paging the study's runs by index."""
    pagination = Pagination()
    pagination.django_paginator_class = functools.partial(  # type: ignore[assignment]
        IndexRangePaginator, count=study.run_count
    )
    return pagination
