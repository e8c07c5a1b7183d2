-- Drives Neovim's built-in LSP client against `contractd lsp`, as an
-- author's editor would: open a contract with a typo, wait for the
-- diagnostic, ask for completion inside a table cell and for hover, apply
-- the quick fix, and time open→diagnostic and change→diagnostic. The plan
-- (positions, paths) comes from the Go test as JSON; the results go back
-- as JSON. Run by lsp/nvim_test.go with `nvim --headless --clean`.
local plan = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv("CONTRACTD_NVIM_PLAN")), "\n"))
local result = {}

local function finish(err)
  if err then result.error = tostring(err) end
  vim.fn.writefile({ vim.fn.json_encode(result) }, plan.result)
  vim.cmd("qa!")
end

local function now() return vim.loop.hrtime() end
local function ms(since) return (vim.loop.hrtime() - since) / 1e6 end

local function errors(buf)
  return vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR })
end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(plan.file))
  local buf = vim.api.nvim_get_current_buf()
  local started = now()
  local id = vim.lsp.start_client({
    name = "contractd",
    cmd = { plan.contractd, "lsp" },
    root_dir = vim.fn.fnamemodify(plan.file, ":h"),
    -- Every change is sent at once: the figures are the server's.
    flags = { debounce_text_changes = 0 },
  })
  assert(id, "start_client failed")
  vim.lsp.buf_attach_client(buf, id)

  -- Open: the typo's diagnostic.
  assert(vim.wait(60000, function() return #errors(buf) > 0 end, 1), "no diagnostic within a minute of opening")
  result.open_ms = ms(started)
  local d = errors(buf)[1]
  result.diagnostic = { line = d.lnum, col = d.col, end_col = d.end_col, message = d.message }

  local uri = vim.uri_from_bufnr(buf)
  local function request(method, params)
    local res = vim.lsp.buf_request_sync(buf, method, params, 30000)
    assert(res, method .. ": no answer")
    for _, r in pairs(res) do
      assert(not r.err, method .. ": " .. vim.inspect(r.err))
      return r.result
    end
  end

  -- Completion inside a health table's cell.
  local list = request("textDocument/completion", { textDocument = { uri = uri }, position = plan.complete })
  local items = list and (list.items or list) or {}
  result.completion = {}
  for _, it in ipairs(items) do table.insert(result.completion, it.label) end

  -- Hover on an action row.
  local h = request("textDocument/hover", { textDocument = { uri = uri }, position = plan.hover })
  result.hover = h and h.contents and (h.contents.value or h.contents) or ""

  -- The quick fix, applied as the client applies a code action's edit.
  local actions = request("textDocument/codeAction", {
    textDocument = { uri = uri },
    range = { start = { line = d.lnum, character = d.col }, ["end"] = { line = d.lnum, character = d.end_col } },
    -- The server keeps each diagnostic's suggestion itself: the context
    -- it is sent back in is not needed.
    context = { diagnostics = {} },
  })
  assert(actions and #actions == 1, "code actions: " .. vim.inspect(actions))
  result.action = actions[1].title
  local changed = now()
  vim.lsp.util.apply_workspace_edit(actions[1].edit, "utf-16")
  assert(vim.wait(60000, function() return #errors(buf) == 0 end, 1), "the error is still there a minute after the fix")
  result.fix_ms = ms(changed)
  result.fixed_line = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1]

  -- A change that makes a mistake: its diagnostic, timed.
  local line = vim.api.nvim_buf_get_lines(buf, plan.change.line, plan.change.line + 1, false)[1]
  changed = now()
  vim.api.nvim_buf_set_lines(buf, plan.change.line, plan.change.line + 1, false, { (line:gsub(plan.change.from, plan.change.to, 1)) })
  assert(vim.wait(60000, function() return #errors(buf) > 0 end, 1), "no diagnostic within a minute of the change")
  result.change_ms = ms(changed)
  result.change_diagnostic = errors(buf)[1].message

  vim.lsp.stop_client(id)
end)
finish(not ok and err or nil)
