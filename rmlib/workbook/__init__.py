"""The workbook: what the notebooks call (`steps`), their execution in order through papermill
(`execute`: resumed by state.json, sweeps), the machine a run needs, checked first (`device`),
what a run will cost before it starts (`plan`, the dry run; `preflight`, a few items at the
longest lengths), the report (`report`), the facts line under each notebook's title (`facts`),
JupyterLab over a run folder (`lab`) and fetching a profile's model and data for offline nodes
(`fetch`).
"""
