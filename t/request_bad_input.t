#!/usr/bin/perl

# R-REQ-1: bad client input gets a 4xx JSON error in the OpenAI shape and
# no provider call.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

$t->write_file('key', "sk-1\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider empty url=http://127.0.0.1:%%PORT_mock_p%%/empty;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;

    omniroute_model known p/known-up;

    server {
        listen 127.0.0.1:%%PORT_gw%%;
        client_max_body_size 1k;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

sub is_error {
    my ($r, $status, $code, $name) = @_;
    is($r->{status}, $status, "$name: status $status");
    my $doc = OmniTest::json($r);
    ok($doc && ref $doc->{error} eq 'HASH'
       && defined $doc->{error}{message} && defined $doc->{error}{type},
       "$name: OpenAI error shape") or diag($r->{body});
    is($doc && $doc->{error}{code}, $code, "$name: code $code");
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         "$name: JSON content type");
}

is_error($t->post($gw, '/v1/chat/completions', 'not json {'),
         400, 'invalid_json', 'R-REQ-1 body that is not JSON');
is_error($t->post($gw, '/v1/chat/completions', ''),
         400, 'invalid_json', 'R-REQ-1 empty body');
is_error($t->post($gw, '/v1/chat/completions', '[1,2]'),
         400, 'invalid_json', 'R-REQ-1 JSON that is not an object');
is_error($t->post($gw, '/v1/chat/completions', '{"messages":[]}'),
         400, 'missing_model', 'R-REQ-1 no model');
is_error($t->post($gw, '/v1/chat/completions', '{"model":42}'),
         400, 'invalid_model', 'R-REQ-1 model that is not a string');
is_error($t->post($gw, '/v1/chat/completions', '{"model":""}'),
         400, 'invalid_model', 'R-REQ-1 empty model');
is_error($t->post($gw, '/v1/chat/completions', '{"model":"gpt-9"}'),
         404, 'model_not_found', 'R-REQ-1 unknown model');
is_error($t->post($gw, '/v1/chat/completions', '{"model":"ghost/x"}'),
         404, 'model_not_found', 'R-REQ-1 provider/model of no provider');
is_error($t->post($gw, '/v1/chat/completions', '{"model":"empty/m"}'),
         404, 'no_executable_targets',
         'R-REQ-6 a model no connection serves');
{
    my $r = $t->post($gw, '/v1/chat/completions', '{"model":"empty/m"}');
    my $d = eval { JSON::PP::decode_json($r->{body})->{diagnostics} } || {};
    is_deeply([$d->{excluded}, $d->{routes}], [[], 0],
              'issue 25: with diagnostics (nothing excluded, no route)')
        or diag($r->{body});
    like($d->{reason} // '', qr/no connection is declared/,
         '... saying why');
}
is_error($t->post($gw, '/v1/chat/completions',
                  '{"model":"known","pad":"' . ('x' x 2000) . '"}'),
         413, 'request_too_large', 'R-REQ-1 body over client_max_body_size');
is_error($t->http($gw, "POST /v1/chat/completions HTTP/1.1\r\n"
                  . "Host: x\r\nConnection: close\r\n"
                  . "Transfer-Encoding: chunked\r\n\r\n"
                  . "800\r\n" . ('x' x 2048) . "\r\n0\r\n\r\n"),
         413, 'request_too_large', 'R-REQ-1 chunked body over the limit');
is_error($t->get($gw, '/v1/chat/completions'),
         405, 'method_not_allowed', 'R-REQ-1 wrong method');
is_error($t->post($gw, '/v1/chat/completions',
                  '{"model":"known","model":"other"}'),
         400, 'invalid_json', 'R-REQ-1 duplicate keys');

is(scalar @{$m->requests}, 0, 'R-REQ-1 no bad request reached the provider');

# and a good request still works afterwards
my $r = $t->post($gw, '/v1/chat/completions', '{"model":"known"}');
is($r->{status}, 200, 'a good request after the bad ones');
is(scalar @{$m->requests}, 1, 'is the only one the provider saw');

$t->done;
done_testing;
