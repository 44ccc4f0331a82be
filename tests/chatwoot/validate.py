# openapi-core over the Chatwoot double's recorded exchanges (tests/src/chatwoot.rs):
# stdin {"spec": path, "exchanges": [...]}, stdout {"checked": n, "problems": [...]}.
# spec_validator is off: Chatwoot's description does not pass openapi-spec-validator,
# which stops at paths the bridge never calls.
import json, sys
from openapi_core import OpenAPI, Config
from openapi_core.testing import MockRequest, MockResponse
inp = json.load(sys.stdin)
api = OpenAPI.from_dict(json.load(open(inp["spec"])), config=Config(spec_validator_cls=None))
problems = []
for x in inp["exchanges"]:
    body = x["body"]
    ct = x["content_type"] or None
    if x["multipart"]:
        b = dict(body)
        b.pop("attachments[]", None)
        if "private" in b: b["private"] = b["private"] == "true"
        if "content_attributes" in b: b["content_attributes"] = json.loads(b["content_attributes"])
        b.setdefault("content", "")
        body, ct = b, "application/json"
    data = None if body is None else json.dumps(body)
    q = x["query"]
    req = MockRequest("https://app.chatwoot.com", x["method"], x["path"], args=dict(p.split("=", 1) for p in q.split("&")) if q else {},
                      data=data, headers=x["headers"], content_type=ct)
    name = f'{x["method"].upper()} {x["path"]}'
    try:
        api.validate_request(req)
    except Exception as e:
        problems.append(f"{name} request: {type(e).__name__}: {str(e)[:300]} {getattr(e, '__cause__', '')}")
    if x["response"] is None:
        res = MockResponse(b"", status_code=x["status"], content_type=None)
    else:
        res = MockResponse(json.dumps(x["response"]).encode(), status_code=x["status"], content_type="application/json")
    if x["status"] < 300:
        try:
            api.validate_response(req, res)
        except Exception as e:
            problems.append(f"{name} response: {type(e).__name__}: {str(e)[:300]} {getattr(e, '__cause__', '')}")
print(json.dumps({"checked": len(inp["exchanges"]), "problems": problems}))
