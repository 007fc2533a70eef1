#!/usr/bin/perl

# R-TOOL-1..4: a provider answer that says the request has too many tools
# falls over to a target that accepts them, and the provider/model is
# backed off for such requests: later requests with at least as many
# tools skip it, requests with fewer (or none) still use it.  Bodies: a
# real coding-agent request (shared/fixtures/agent_body.py) with its tools
# multiplied.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new;
my $a = $t->mock('a');
my $b = $t->mock('b');

my $TOKEN = 'adm-0123456789-abcdefghij';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $fixture = "$FindBin::Bin/../../shared/fixtures/agent_body.py";
$fixture = '/work/shared/fixtures/agent_body.py' unless -e $fixture;

my $base = decode_json(`python3 $fixture 16 smart`);

sub body_with_tools {
    my ($n) = @_;
    my %body = %$base;
    my @tools;
    for my $i (0 .. $n - 1) {
        my $tool = JSON::PP->new->decode(
            encode_json($base->{tools}[$i % @{$base->{tools}}]));
        $tool->{function}{name} = "tool_$i";
        push @tools, $tool;
    }
    $body{tools} = \@tools;
    delete $body{tools} if $n == 0;
    return encode_json(\%body);
}

my $err = JSON::PP->new->canonical->encode({ error => {
    message => "Invalid 'tools': array too long. Expected an array with "
               . "maximum length 128, but got an array with length 200 "
               . "instead.",
    type => 'invalid_request_error', param => 'tools',
    code => 'array_above_max_length' } });
(my $esc = $err) =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;

$t->write_file('key-a1', "sk-a1\n");
$t->write_file('key-b1', "sk-b1\n");

$t->config(<<'EOF', main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

    omniroute_provider a url=http://127.0.0.1:%%PORT_mock_a%%/v1;
    omniroute_provider b url=http://127.0.0.1:%%PORT_mock_b%%/v1;

    omniroute_connection a1 provider=a key_file=%%TESTDIR%%/key-a1;
    omniroute_connection b1 provider=b key_file=%%TESTDIR%%/key-b1;

    omniroute_combo smart a/gpt-4.1 b/claude-sonnet;

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        client_max_body_size 8m;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub metric {
    my ($name) = @_;
    my $r = $t->http($gw, OmniTest::request_text('GET', '/metrics', undef,
                                 Authorization => "Bearer $TOKEN"));
    return $r->{body} =~ /^\Q$name\E (\d+)/m ? $1 : -1;
}

sub to_a { scalar @{$a->requests} }

# 200 tools: provider a refuses them

$a->set_behavior("status=400,body=$esc");

my $r = $t->post($gw, '/v1/chat/completions', body_with_tools(200));

is($r->{status}, 200, 'R-TOOL-1 too many tools: the request falls over ...');
is($r->{headers}{'x-omniroute-connection'}, 'b1', '... to a target that '
   . 'accepts them');
like($r->{headers}{'x-omniroute-trail'} // '', qr/^a1;400;\d+ms, b1;200/,
     'R-TOOL-1 a1 answered 400 first');
is(scalar @{decode_json($b->requests->[0]{body})->{tools}}, 200,
   'b got all 200 tools');
is(metric('omniroute_tool_limit_total{event="backoff"}'), 1,
   'metrics: one backoff');
is(metric('omniroute_attempts_total{reason="tool_limit"}'), 1,
   'metrics: the attempt counted as tool_limit');
like($t->error_log, qr/"a\/gpt-4\.1" refused 200 tools/, 'logged');

# provider a would accept now (its limit is the record's business)

$a->set_behavior('ok');

$r = $t->post($gw, '/v1/chat/completions', body_with_tools(200));
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'R-TOOL-4 200 tools again: a is skipped');
is($r->{headers}{'x-omniroute-attempts'}, '1', '... without an attempt');
is(to_a(), 1, 'R-TOOL-4 a got no second large request');

$r = $t->post($gw, '/v1/chat/completions', body_with_tools(300));
is($r->{headers}{'x-omniroute-connection'}, 'b1',
   'R-TOOL-4 300 tools (more): skipped too');

$r = $t->post($gw, '/v1/chat/completions', body_with_tools(5));
is($r->{status}, 200, 'R-TOOL-4 5 tools ...');
is($r->{headers}{'x-omniroute-connection'}, 'a1', '... still use a');

$r = $t->post($gw, '/v1/chat/completions', body_with_tools(150));
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'R-TOOL-4 150 tools (fewer than the 200 refused) still use a');

$r = $t->post($gw, '/v1/chat/completions', body_with_tools(0));
is($r->{headers}{'x-omniroute-connection'}, 'a1',
   'R-TOOL-4 no tools: a');

cmp_ok(metric('omniroute_tool_limit_total{event="skip"}'), '>=', 2,
       'metrics: the skips');

# asked for a alone with 200 tools: excluded, with its reason

$r = $t->post($gw, '/v1/chat/completions',
              body_with_tools(200) =~ s/"model":"smart"/"model":"a\/gpt-4.1"/r);
is($r->{status}, 503, 'R-TOOL-4 a alone: 503');
is(OmniTest::json($r)->{diagnostics}{excluded}[0]{reason}, 'tool_limit',
   '... reason tool_limit');
cmp_ok(OmniTest::json($r)->{diagnostics}{excluded}[0]{retry_after_s}, '>',
       3500, '... for about an hour (tool_limit.backoff_ms)');

$t->done;
done_testing;
