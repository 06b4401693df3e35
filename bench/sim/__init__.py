"""A discrete-event simulator of Windtunnel's scheduling that runs the real code.

The model is a pool of workers (cores, boot time, a layer cache of a given size, a link of a
given bandwidth), a set of images made of layers, and tenants submitting studies of runs with
drawn durations (`bench.sim.scenario`), played on a virtual clock (`bench.sim.model`).
Every decision is made by the portal's own functions, called with the model's numbers
instead of rows:

- admission: `scheduler.decide.admission_decide` with the policy's queue order
  (`scheduler.policies`), fair share (`scheduler.fairshare`) and backfill
  (`scheduler.backfill`);
- placement: `orchestration.planning.placement` (round_robin, random, least_loaded, image_aware);
- the autoscaler: `dispatch.autoscale.scale_up_plan` and `scale_down_plan`.

What the model adds is only what the machines would do: time passing, images pulled layer by
layer over the worker's link, caches evicting the least recently used layer, runs ending.
`make bench NAME=scheduling` runs the scenarios; docs/scheduling.md has the figures.
"""
